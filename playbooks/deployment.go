package playbooks

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/transport"
)

// deployment is one run's work of putting on the hosts what its plan says they should hold: render
// locally, push each host's files and apply them, start or restart kubelets, roll control-plane nodes one
// at a time. Up, upgrade, certs rotate and the CA rotation each make one (newDeployment); what it changes
// on hosts goes through record, so that a dry run reports exactly what a real run does. It holds no plan:
// each of its functions that reads one takes it (see plan). What it holds beside the session and the
// options is what the run did: the tokens it made, the approver of its kubelets' certificates, the record.
type deployment struct {
	e *Env
	o deployOptions
	// keep, when set, keeps only the files (and image archives) a phase pushes: an upgrade pushes a
	// control-plane node's static Pods and certificates before its kubelet (see only).
	keep func(path string) bool
	// previous, when set, is where each file's first write keeps what it replaces (transport.File.Previous):
	// an upgrade's phase, which a rollback puts back (see keeping).
	previous string

	// the run's join state: a token for each host joining by TLS bootstrap, and the approver of their
	// certificates
	tokens   map[string]bootstrap.Token
	approver *csr.Approver

	rec *recorder
}

// recorder keeps what a run changed on each host, or in a dry run would change, and which kubelets must
// restart for it.
type recorder struct {
	mu             sync.Mutex
	restartKubelet map[string]bool // hosts whose kubelet files changed in this run
	outcomes       map[string]*apply.Outcome
}

// keeping is the deployment keeping on each node, under dir, what its writes replace.
func (d *deployment) keeping(dir string) *deployment {
	c := *d
	c.previous = dir
	return &c
}

// only is the deployment pushing only the files keep keeps.
func (d *deployment) only(keep func(path string) bool) *deployment {
	c := *d
	c.keep = keep
	return &c
}

type deployOptions struct {
	Now      func() time.Time
	DryRun   bool
	Renew    *render.Renewal // certs rotate
	TokenTTL time.Duration
	// Timeout bounds each wait for an API server, a node's static Pods, serving certificates.
	Timeout time.Duration
	// KubeletBatch is how many workers' kubelets restart at once where they run already (rollKubelets; 0
	// is 1), and KubeletTimeout bounds the wait for each batch's Nodes and Pods (Timeout when 0).
	KubeletBatch   int
	KubeletTimeout time.Duration
	// PKIDir, when set, is where render keeps the PKI and kubeconfigs instead of the state directory (a
	// dry run of certs rotate renews a copy).
	PKIDir string
}

// allHosts are every inventory host: rotations act on the whole fleet.
func allHosts(inv *inventory.Inventory) []*inventory.Host {
	out := make([]*inventory.Host, len(inv.Hosts))
	for i := range inv.Hosts {
		out[i] = &inv.Hosts[i]
	}
	return out
}

// localProxy reports whether the cluster's nodes reach the API servers through the node-local proxy.
func (d *deployment) localProxy(p *plan) bool { return render.LocalProxyOf(d.e.Inv, p.cps) }

// record keeps what a unit of work changed on a host, or in a dry run would change: the run's plan. A
// changed kubelet file marks the host's kubelet for a restart.
func (d *deployment) record(host string, o apply.Outcome) {
	r := d.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.outcomes[host]
	if cur == nil {
		cur = &apply.Outcome{}
		r.outcomes[host] = cur
	}
	cur.Add(o)
	for _, f := range o.Files {
		if apply.KubeletFile(f.Path) {
			r.restartKubelet[host] = true
		}
	}
}

// started is when the run last started or restarted the kubelet on host, by the host's clock (zero: it did
// not).
func (d *deployment) started(host string) time.Time {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	if o := d.rec.outcomes[host]; o != nil {
		return o.Started
	}
	return time.Time{}
}

// anyChanged reports whether a play changed something on some host.
func anyChanged(res []transport.HostResult) bool {
	return slices.ContainsFunc(res, func(r transport.HostResult) bool { return r.Status == transport.StatusChanged })
}

func (p *plan) caPEM() []byte { return caOf(p.rendered) }

// workers are the run's hosts that are nodes but not control-plane nodes.
func (p *plan) workers() []*inventory.Host {
	var out []*inventory.Host
	for _, h := range p.hosts {
		if h.IsNode() && !h.Has(inventory.RoleControlPlane) {
			out = append(out, h)
		}
	}
	return out
}

// nodes are the run's hosts that are Kubernetes nodes (not those that only run an external etcd member).
func (p *plan) nodes() []*inventory.Host {
	return slices.DeleteFunc(slices.Clone(p.hosts), func(h *inventory.Host) bool { return !h.IsNode() })
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// HostPlan is what a dry run found would change on a host.
type HostPlan struct {
	Host    string        `json:"host"`
	Files   []PlannedFile `json:"files"`
	Actions []string      `json:"actions"`
}

// hookAction begins a dry run's record of a hook it would run: what the operator asked for, not a
// difference of the host's.
const hookAction = "run hook "

// Changes are the actions of the plan that change the host: every one but the hooks a run would run.
func (p HostPlan) Changes() []string {
	var out []string
	for _, a := range p.Actions {
		if !strings.HasPrefix(a, hookAction) {
			out = append(out, a)
		}
	}
	return out
}

// PlannedFile is one file a real run would write.
type PlannedFile = apply.FileChange

// ErrPreflight is returned when preflight found errors; the report is in the result.
var ErrPreflight = errors.New("preflight found errors")

// label sets a host's Node labels and taints (nodes.Label) and says what it changed.
func (d *deployment) label(ctx context.Context, kube kubernetes.Interface, play string, h *inventory.Host) error {
	return d.labelNode(ctx, kube, play, nil, h)
}

// labelNode is label starting from the Node read (nil: it is read).
func (d *deployment) labelNode(ctx context.Context, kube kubernetes.Interface, play string, read *corev1.Node, h *inventory.Host) error {
	changes, err := nodes.LabelNode(ctx, kube, read, h, d.e.Inv.NodeSettings(h))
	if len(changes) > 0 {
		d.e.say(play, h.Name, "Node %s: %s", h.NodeName, strings.Join(changes, ", "))
	}
	return err
}
