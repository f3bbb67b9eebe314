package runlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

// The cluster's lock: one Lease, its holder in an annotation (holderIdentity is the run's ID).
const (
	LeaseName        = "clusterctl-run"
	LeaseNamespace   = "kube-system"
	holderAnnotation = "clusterctl.dev/holder"
	// DefaultDuration is how long a Lease not renewed holds: a run renews it every sixth of it, so a run
	// whose API server restarts (an upgrade of one control-plane node) keeps it.
	DefaultDuration = 30 * time.Second
)

// ErrLost is a Lease another run took over (it expired while this run could not renew it).
var ErrLost = errors.New("the cluster's lock was taken over by another run")

// Options says how to take the Lease.
type Options struct {
	Duration time.Duration
	// Force takes a Lease another run holds (--force-unlock).
	Force bool
	// Dead is the ID of a holder known to be gone (the run of this state directory whose file lock was
	// found free): its Lease is taken over at once.
	Dead string
	Now  func() time.Time
}

// Leases gives the client of the cluster's Leases in kube-system, made again when its credentials change (a
// CA rotation renews them while it holds the lock).
type Leases func(ctx context.Context) (coordclient.LeaseInterface, error)

// Lease is the cluster's lock, held.
type Lease struct {
	c   Leases
	h   Holder
	dur time.Duration
	now func() time.Time
}

// Acquire takes the cluster's Lease for h, or returns a HeldError naming who holds it. taken is the holder
// whose Lease it took over (expired, dead, or forced), nil when the Lease was free.
func Acquire(ctx context.Context, leases Leases, h Holder, o Options) (l *Lease, taken *Holder, err error) {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l = &Lease{c: leases, h: h, dur: o.Duration, now: o.Now}
	for try := 0; ; try++ {
		taken, err = l.acquire(ctx, o)
		if err == nil || try == 2 || !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return l, taken, err
		}
		// Another run wrote the Lease between our read and write: read it again.
	}
}

func (l *Lease) acquire(ctx context.Context, o Options) (*Holder, error) {
	c, err := l.c(ctx)
	if err != nil {
		return nil, err
	}
	cur, err := c.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, l.object(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: LeaseNamespace}}), metav1.CreateOptions{})
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	state := Read(cur)
	if state.Holder != nil && state.Holder.ID != l.h.ID && !state.Expires.Before(o.Now()) && !o.Force && state.Holder.ID != o.Dead {
		return nil, &HeldError{Holder: *state.Holder, Where: "the cluster", Renewed: state.Renewed, Expires: state.Expires}
	}
	if _, err := c.Update(ctx, l.object(cur.DeepCopy()), metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	return state.Holder, nil
}

// object is lease held by l from now (acquired, renewed).
func (l *Lease) object(lease *coordinationv1.Lease) *coordinationv1.Lease {
	now := metav1.NewMicroTime(l.now())
	data, _ := json.Marshal(l.h)
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != l.h.ID {
		lease.Spec.AcquireTime = &now
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	}
	lease.Annotations[holderAnnotation] = string(data)
	lease.Spec.HolderIdentity = ptr.To(l.h.ID)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(l.dur / time.Second))
	lease.Spec.RenewTime = &now
	return lease
}

// State is what a Lease says: its holder (nil: free), when it was last renewed and when it expires.
type State struct {
	Holder           *Holder
	Renewed, Expires time.Time
}

// Read is what lease says, each value checked: a holder without clusterctl's annotation is named by its
// identity, a Lease without renewal or duration is expired.
func Read(lease *coordinationv1.Lease) State {
	id := ptr.Deref(lease.Spec.HolderIdentity, "")
	if id == "" {
		return State{}
	}
	h := Holder{ID: id, Command: "a run"}
	if s := lease.Annotations[holderAnnotation]; len(s) <= 4096 {
		var a Holder
		if json.Unmarshal([]byte(s), &a) == nil && a.ID == id {
			h = a
		}
	}
	h = h.clean()
	st := State{Holder: &h}
	if lease.Spec.RenewTime != nil {
		st.Renewed = lease.Spec.RenewTime.Time
	}
	if d := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); d > 0 && d <= 86400 && !st.Renewed.IsZero() {
		st.Expires = st.Renewed.Add(time.Duration(d) * time.Second)
	}
	return st
}

// Current reads the cluster's Lease: nil when no run holds it.
func Current(ctx context.Context, leases coordclient.LeaseInterface) (*State, error) {
	cur, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := Read(cur)
	if st.Holder == nil {
		return nil, nil
	}
	return &st, nil
}

// held reads the Lease this run holds; ErrLost when it is gone or another run holds it now.
func (l *Lease) held(ctx context.Context) (coordclient.LeaseInterface, *coordinationv1.Lease, error) {
	c, err := l.c(ctx)
	if err != nil {
		return nil, nil, err
	}
	cur, err := c.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && ptr.Deref(cur.Spec.HolderIdentity, "") != l.h.ID {
		return nil, nil, ErrLost
	}
	return c, cur, err
}

// Renew renews the Lease; ErrLost when another run holds it now.
func (l *Lease) Renew(ctx context.Context) error {
	c, cur, err := l.held(ctx)
	if err != nil {
		return err
	}
	_, err = c.Update(ctx, l.object(cur), metav1.UpdateOptions{})
	return err
}

// Keep renews the Lease every sixth of its duration (every 2 s after a failure) until stop is called;
// failed hears each failure (an API server restarting, ErrLost).
func (l *Lease) Keep(failed func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := l.dur / 6
		next := every
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(next):
			}
			rctx, done := context.WithTimeout(ctx, every)
			err := l.Renew(rctx)
			done()
			next = every
			if err != nil && ctx.Err() == nil {
				failed(err)
				next = 2 * time.Second
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// Release gives the Lease up: deleted if this run still holds it.
func (l *Lease) Release(ctx context.Context) error {
	c, cur, err := l.held(ctx)
	if errors.Is(err, ErrLost) {
		return nil
	}
	if err == nil {
		err = c.Delete(ctx, LeaseName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing the cluster's lock: %w", err)
	}
	return nil
}
