package playbooks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/runlock"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/transport"
)

// lockPlay is the name the lock's messages go under.
const lockPlay = "lock"

// LockOptions says how a mutating run takes the cluster's lock.
type LockOptions struct {
	// Command is what the holder runs, as an operator types it ("certs rotate").
	Command string
	// Force takes a lock another run holds (--force-unlock), with a warning.
	Force bool
	// Duration of the Lease (runlock.DefaultDuration when 0).
	Duration time.Duration
	// Beside reads the cluster's Lease beside the run's first steps, which only read (Step.Reads: up's
	// facts, render and settled check), and takes it before any other step; a run that ends having
	// changed nothing takes it only from a holder gone or expired (Env.lockHeld, leaseBeside). The
	// playbook must hand Env.lockHeld to its runner (up does).
	Beside bool
}

// Lock takes the locks of one mutating run before its first change: the state directory's file lock, then,
// when the state directory holds a cluster, its Lease in kube-system, renewed until release. Another run
// holding either is a runlock.HeldError naming it. A cluster whose API server does not answer (down, being
// restored) is worked on under the file lock alone, said as a warning. release gives both up.
func (e *Env) Lock(ctx context.Context, o LockOptions) (release func(), err error) {
	h := runlock.NewHolder(o.Command)
	file, prev, err := runlock.LockFile(e.StateDir, h)
	if err != nil {
		return nil, err
	}
	if built, _ := statedir.IsBuilt(e.StateDir, csr.LearnedFile); !built {
		return file.Release, nil
	}
	dead := ""
	if prev != nil {
		dead = prev.ID
	}
	ro := runlock.Options{Duration: o.Duration, Force: o.Force, Dead: dead}
	if o.Beside {
		return e.leaseBeside(ctx, file, h, ro), nil
	}
	lease, err := e.acquireLease(ctx, &lockClient{e: e}, h, ro)
	if err = e.leaseTaken(ctx, err); err != nil {
		file.Release()
		return nil, err
	}
	if lease == nil && prev != nil {
		// The API server did not answer (a run killed while it restarted the only one): the takeover is
		// the file's alone.
		e.say(lockPlay, "", "the state directory's lock of %s, a run of this state directory that is gone, taken over", prev)
	}
	return e.keepLease(file, lease), nil
}

// leaseTaken is the outcome of taking the cluster's Lease: nil when it is held, or when the API server did
// not answer (said as a warning: the run holds the state directory's lock alone); the error of another
// run holding it, or of the run's end.
func (e *Env) leaseTaken(ctx context.Context, err error) error {
	if errors.Is(err, runlock.ErrHeld) || ctx.Err() != nil {
		return cmp.Or(err, ctx.Err())
	}
	if err != nil {
		e.say(lockPlay, "", "warning: the cluster's API server did not answer (%v): this run holds only this state directory's lock", err)
	}
	return nil
}

// keepLease renews a Lease taken (nil: none) until the release it returns gives it up, with the state
// directory's lock.
func (e *Env) keepLease(file *runlock.File, lease *runlock.Lease) (release func()) {
	if lease == nil {
		return file.Release
	}
	stop := lease.Keep(func(err error) {
		if errors.Is(err, runlock.ErrLost) {
			e.say(lockPlay, "", "warning: %v while this run could not renew it", err)
		}
	})
	return func() {
		stop()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if lease.Release(rctx) != nil {
			// A reset cluster, an API server down: the Lease expires by itself, and the next run of this
			// state directory, finding this run named in the file, takes it over at once.
			file.Leave()
			return
		}
		file.Release()
	}
}

// leaseBeside reads the cluster's Lease in the background (LockOptions.Beside) and takes it when the run is
// about to change something: Env.lockHeld(true) takes it then (once; every caller gets what taking it came
// to, leaseTaken), renewed from then on. A run that ends having changed nothing (a no-op up) does not write
// the Lease: Env.lockHeld(false) refuses it as before when another run holds the Lease, takes it over when
// its holder is gone or expired (said as a takeover), and leaves it alone when it is free. release gives up
// what was taken; a run that ends before it waited stops reading.
func (e *Env) leaseBeside(ctx context.Context, file *runlock.File, h runlock.Holder, o runlock.Options) (release func()) {
	lctx, cancel := context.WithCancel(ctx)
	lc := &lockClient{e: e}
	read := make(chan struct{})
	var (
		cur     *runlock.State
		readErr error
	)
	go func() {
		defer close(read)
		cur, readErr = e.readLease(lctx, lc)
	}()
	var (
		once  sync.Once
		held  error
		kept  func()
		taken bool
	)
	take := func() error {
		once.Do(func() {
			<-read
			taken = true
			if readErr != nil {
				// The API server did not answer the read within its 10 s: not asked again.
				held = e.leaseTaken(lctx, readErr)
				return
			}
			lease, err := e.acquireLease(lctx, lc, h, o)
			if err == nil {
				kept = e.keepLease(file, lease)
			}
			held = e.leaseTaken(lctx, err)
		})
		return held
	}
	wait := func(changes bool) error {
		if changes || taken {
			return take()
		}
		<-read
		if readErr == nil && cur == nil {
			return nil // free: a run that changed nothing needs no more
		}
		return take()
	}
	e.mu.Lock()
	e.lockHeld = wait
	e.mu.Unlock()
	return func() {
		cancel()
		<-read
		e.mu.Lock()
		e.lockHeld = nil
		e.mu.Unlock()
		if kept != nil {
			kept()
			return
		}
		file.Release()
	}
}

// lockClient is the lock's own client of the cluster's Leases: through the first control-plane node's
// connection as the playbook keeps it (never connecting in the background: a renewal while that node
// reboots waits for the playbook's next connection), made again when admin.conf or the connection changed.
type lockClient struct {
	e    *Env
	mu   sync.Mutex
	conn *transport.Conn
	conf []byte
	c    coordclient.LeaseInterface
}

func (l *lockClient) leases(ctx context.Context) (coordclient.LeaseInterface, error) {
	cp1, err := l.e.firstControlPlane()
	if err != nil {
		return nil, err
	}
	conn := l.e.Conn(cp1.Name)
	if conn == nil {
		return nil, fmt.Errorf("%s: not connected", cp1.Name)
	}
	conf, err := pki.ReadSecret(l.e.adminKubeconfig())
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil && l.conn == conn && bytes.Equal(l.conf, conf) {
		return l.c, nil
	}
	ip, err := l.e.NodeIP(ctx, cp1)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(l.e.Inv.Cluster.APIServer.BindPort))
	c, err := apiclient.New(conf, func(ctx context.Context, _, _ string) (net.Conn, error) { return conn.DialContext(ctx, "tcp", addr) })
	if err != nil {
		return nil, err
	}
	l.conn, l.conf, l.c = conn, conf, c.Kube.CoordinationV1().Leases(runlock.LeaseNamespace)
	return l.c, nil
}

// readLease reads the cluster's Lease (nil: free) through lc, waiting at most 10 s for its API server.
func (e *Env) readLease(ctx context.Context, lc *lockClient) (*runlock.State, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.connectFirst(ctx); err != nil {
		return nil, err
	}
	leases, err := lc.leases(ctx)
	if err != nil {
		return nil, err
	}
	return runlock.Current(ctx, leases)
}

// connectFirst connects to the first control-plane node, the lock's way to the API server.
func (e *Env) connectFirst(ctx context.Context) error {
	cp1, err := e.firstControlPlane()
	if err != nil {
		return err
	}
	_, err = Connect(ctx, e, []*inventory.Host{cp1}, 0)
	return err
}

// acquireLease takes the cluster's Lease through lc, waiting at most 10 s for its API server.
func (e *Env) acquireLease(ctx context.Context, lc *lockClient, h runlock.Holder, o runlock.Options) (*runlock.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.connectFirst(ctx); err != nil {
		return nil, err
	}
	lease, taken, err := runlock.Acquire(ctx, lc.leases, h, o)
	if err != nil {
		return nil, err
	}
	switch {
	case taken == nil:
	case taken.ID == o.Dead:
		e.say(lockPlay, "", "the cluster's lock of %s, a run of this state directory that is gone, taken over", taken)
	case o.Force:
		e.say(lockPlay, "", "warning: --force-unlock: the cluster's lock of %s taken; if that run still works, the two runs may undo each other's changes", taken)
	default:
		e.say(lockPlay, "", "the cluster's lock of %s had expired; taken over", taken)
	}
	return lease, nil
}
