package playbooks

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/transport"
)

// deployment is one run's view of what the hosts should hold, and the work of putting it there: render
// locally, push each host's files and apply them, start or restart kubelets, roll control-plane nodes one
// at a time. Up, RotateCerts and RotateCA each make one (newDeployment); what it changes on hosts goes
// through record, so that a dry run reports exactly what a real run does.
type deployment struct {
	e     *Env
	hosts []*inventory.Host // the hosts acted on, the first control-plane host among them
	cp1   *inventory.Host
	o     deployOptions

	facts       map[string]*tasks.Facts
	nodeIPs     map[string]string
	cps         []string // the cluster's control-plane hosts (nil: the inventory's)
	rendered    *render.Result
	manifest    *artifacts.Manifest
	artDir      string
	images      images.Set
	kubeletPath string
	member      string
	tokens      map[string]bootstrap.Token // by host: one for each host joining by TLS bootstrap
	joining     map[string]bool            // hosts whose kubelet has no credentials yet: they join with their token
	approver    *csr.Approver
	// external etcd: the run's etcd hosts that join the running etcd cluster (the members they join), and
	// the hosts whose member is in it already
	etcdJoin    map[string][]manifests.EtcdMember
	etcdMembers []string

	// filter, when set, keeps only the files (and image archives) a phase pushes: an upgrade pushes a
	// control-plane node's static Pods and certificates before its kubelet.
	filter func(path string) bool

	mu             sync.Mutex
	restartKubelet map[string]bool // hosts whose kubelet files changed in this run
	outcomes       map[string]*apply.Outcome
}

type deployOptions struct {
	Now      func() time.Time
	DryRun   bool
	Renew    *render.Renewal // certs rotate
	TokenTTL time.Duration
	// Timeout bounds each wait for an API server, a node's static Pods, serving certificates.
	Timeout time.Duration
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
func (d *deployment) localProxy() bool { return render.LocalProxyOf(d.e.Inv, d.cps) }

// record keeps what a unit of work changed on a host, or in a dry run would change: the run's plan. A
// changed kubelet file marks the host's kubelet for a restart.
func (d *deployment) record(host string, o apply.Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.outcomes[host]
	if cur == nil {
		cur = &apply.Outcome{}
		d.outcomes[host] = cur
	}
	cur.Add(o)
	for _, f := range o.Files {
		if apply.KubeletFile(f.Path) {
			d.restartKubelet[host] = true
		}
	}
}

// anyChanged reports whether a play changed something on some host.
func anyChanged(res []transport.HostResult) bool {
	return slices.ContainsFunc(res, func(r transport.HostResult) bool { return r.Status == transport.StatusChanged })
}

func (d *deployment) caPEM() []byte {
	for _, hf := range d.rendered.Hosts {
		for _, f := range hf.Files {
			if f.Path == kubeadm.CACert {
				return f.Data
			}
		}
	}
	return nil
}

// workers are the run's hosts that are nodes but not control-plane nodes.
func (d *deployment) workers() []*inventory.Host {
	var out []*inventory.Host
	for _, h := range d.hosts {
		if h.IsNode() && !h.Has(inventory.RoleControlPlane) {
			out = append(out, h)
		}
	}
	return out
}

// nodes are the run's hosts that are Kubernetes nodes (not those that only run an external etcd member).
func (d *deployment) nodes() []*inventory.Host {
	return slices.DeleteFunc(slices.Clone(d.hosts), func(h *inventory.Host) bool { return !h.IsNode() })
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

// PlannedFile is one file a real run would write.
type PlannedFile = apply.FileChange

// ErrPreflight is returned when preflight found errors; the report is in the result.
var ErrPreflight = errors.New("preflight found errors")
