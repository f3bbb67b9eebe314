package playbooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/charts"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/transport"
)

// UpOptions tune `clusterctl up`.
type UpOptions struct {
	Preflight PreflightOptions
	// APITimeout bounds the wait for the first API server; NodeTimeout the wait for nodes to be Ready.
	APITimeout  time.Duration
	NodeTimeout time.Duration
	// MaxUnavailable is how many running workers' kubelets restart at once where their files changed (0
	// is 1): each batch's Nodes and the Pods Ready on them before are Ready again before the next.
	MaxUnavailable int
	// TokenTTL is the bootstrap token's lifetime; it is deleted as soon as the nodes have joined.
	TokenTTL time.Duration
	Now      func() time.Time
	// DryRun goes through the steps that touch hosts recording, instead of making, every change: the
	// per-host plan of what would be uploaded, imported, started. Nothing on the hosts is changed (the PKI is
	// made or kept in the local state directory).
	DryRun bool
	// Full runs every step even when every host is settled (the settled step skipped).
	Full bool
	// Hooks is the command whose inventory hooks run (inventory.HookUp, the default, or HookAddNode), on
	// HookHosts (default: the session's hosts).
	Hooks     string
	HookHosts []string
}

// UpResult is what `up` made.
type UpResult struct {
	Endpoint        string            `json:"endpoint"`
	AdminKubeconfig string            `json:"adminKubeconfig"`
	Nodes           []NodeStatus      `json:"nodes"`
	Phases          []PhaseTiming     `json:"phases"`
	Preflight       *PreflightReport  `json:"preflight,omitempty"`
	Unapproved      map[string]string `json:"unapprovedCSRs,omitempty"`
	// SkippedRoutes are the nodes whose pod routes were not written, with the reason (see bridge.Vet).
	SkippedRoutes []string   `json:"skippedRoutes,omitempty"`
	Plan          []HostPlan `json:"plan,omitempty"`
	// BytesPushed is the file content written to hosts in this run (unchanged files cost nothing here).
	BytesPushed int64 `json:"bytesPushed"`
	// Addons are the add-ons' changes (cluster.addons): done, or in a dry run planned, with their diffs.
	Addons []charts.Change `json:"addons,omitempty"`
}

// NodeStatus is one Node as `up` left it.
type NodeStatus struct {
	Name    string   `json:"name"`
	Roles   []string `json:"roles"`
	Ready   bool     `json:"ready"`
	Version string   `json:"version"`
	PodCIDR string   `json:"podCIDR,omitempty"`
}

// upRun is one run of Up.
type upRun struct {
	*deployment
	o   UpOptions
	res *UpResult
	// later is the push to the hosts the control plane does not start with, under way beside its start
	// (pushStep); nil when there is none.
	later *laterPush
	// early is the pod network of the nodes with a range, under way beside the workers' join
	// (startEarlyNetwork); nil when there is none.
	early *earlyRun
	// heldScheduler is the first control-plane node's scheduler manifest the push left out, for waitAPI to
	// write (holdScheduler).
	heldScheduler []transport.File
	// others are the network facts of the nodes outside the run, asked beside the push and join
	// (prefetchOthers); nil when there is none.
	others *othersRun
}

// earlyRun is the early pod network under way in the background (startEarlyNetwork): its result comes
// on done; stop ends its wait for a node's range, cancel the whole of it.
type earlyRun struct {
	done         chan error
	stop, cancel context.CancelFunc
	// did are the nodes whose routes and CNI configuration a staged network wrote (network.Staged).
	mu  sync.Mutex
	did map[string]bool
}

// markDone records that a staged network wrote a node's files.
func (e *earlyRun) markDone(host string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.did == nil {
		e.did = map[string]bool{}
	}
	e.did[host] = true
}

// othersRun is the other nodes' network facts being gathered in the background (prefetchOthers): each
// node's in hosts, there once its done is closed (nil when it could not be asked); cancel ends the rest.
type othersRun struct {
	hosts  map[string]*otherFacts
	cancel context.CancelFunc
}

type otherFacts struct {
	done  chan struct{}
	facts *facts.Facts
}

// laterPush is a push under way in the background: ended is closed when it has ended, with its error in
// result (for the steps that wait for it: pushed, laterFailed, pushedHost); cancel ends it.
type laterPush struct {
	hosts  []string
	cancel context.CancelFunc
	ended  chan struct{}
	result error
	err    error
	waited bool
}

// laterFailed returns the background push's error once it has ended with one (nil while it runs): the run
// stops at the next step, not only when a step needs the hosts pushed.
func (u *upRun) laterFailed() error {
	l := u.later
	if l == nil || l.waited {
		return nil
	}
	select {
	case <-l.ended:
		return u.laterEnded(l.result, "")
	default:
		return nil
	}
}

// pushed waits for the background push (pushStep), if any, and returns its error (the same to every caller).
func (u *upRun) pushed(ctx context.Context) error {
	l := u.later
	if l == nil {
		return nil
	}
	if l.waited {
		return l.err
	}
	start := time.Now()
	var err error
	select {
	case <-l.ended:
		err = l.result
	case <-ctx.Done():
		l.cancel()
		<-l.ended
		if err = l.result; err == nil {
			err = ctx.Err()
		}
	}
	return u.laterEnded(err, fmt.Sprintf(" (waited %.1fs for it)", time.Since(start).Seconds()))
}

// laterEnded records the background push's end, once: its error for every later caller, its context
// released, and a message when it succeeded.
func (u *upRun) laterEnded(err error, note string) error {
	l := u.later
	l.err, l.waited = err, true
	l.cancel()
	if err == nil {
		u.e.say("push", "", "pushed to %s%s", strings.Join(l.hosts, ", "), note)
	}
	return err
}

// waitNodes polls the Nodes until done says they are as wanted, approving serving CSRs and labelling nodes
// as they come. A node whose host's connection is lost (powered off, its link cut: keepalives unanswered)
// ends the wait at once, named, instead of at the timeout.
func (u *upRun) waitNodes(ctx context.Context, p *plan, play string, done func(map[string]*corev1.Node) (bool, string)) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	u.approver.Kube = admin.Kube
	labelled := map[string]bool{}
	return u.e.pollEvery(ctx, play, "", u.o.NodeTimeout, upPoll, func() (bool, string, error) {
		for _, h := range p.nodes() {
			if c := u.e.Conn(h.Name); c != nil {
				if err := c.Lost(); err != nil {
					return false, "", err
				}
			}
		}
		if _, err := u.approver.Round(ctx); err != nil {
			return false, "", err
		}
		list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		byName := map[string]*corev1.Node{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		for _, h := range p.nodes() {
			if byName[h.NodeName] != nil && !labelled[h.Name] {
				if err := u.labelNode(ctx, admin.Kube, play, byName[h.NodeName], h); err != nil {
					return false, "", err
				}
				labelled[h.Name] = true
			}
		}
		// A joining host's token is deleted as soon as its Node is registered: it has its client
		// certificate, and nobody else is to use its token.
		if err := u.retireTokens(ctx, admin, func(name string) bool { return byName[u.e.Inv.Host(name).NodeName] != nil }); err != nil {
			return false, "", err
		}
		ok, waiting := done(byName)
		return ok, waiting, nil
	})
}

// nodeStatuses are the cluster's Nodes as a run leaves them, by name.
func nodeStatuses(ctx context.Context, admin *apiclient.Client) ([]NodeStatus, error) {
	list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return statusesOf(list.Items), nil
}

// statusesOf are Nodes as a run leaves them, by name.
func statusesOf(items []corev1.Node) []NodeStatus {
	var out []NodeStatus
	for i := range items {
		n := &items[i]
		out = append(out, NodeStatus{Name: n.Name, Roles: nodes.Roles(n), Ready: nodes.Ready(n),
			Version: n.Status.NodeInfo.KubeletVersion, PodCIDR: n.Spec.PodCIDR})
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}
