// Package network is the seam between clusterctl's runs and a pod network. A pod network (cni.plugin) is
// a Plugin: what it needs from the artifacts (images, CNI binaries), the files every node gets with its
// others, what preflight checks on the hosts' facts, the network step of up and add-node, whether up waits
// for Ready nodes, and what reset removes. A run chooses its plugin once, from the inventory.
//
// The plugins clusterctl sets up are packages of their own under tasks/ (tasks/bridge, tasks/flannel);
// the two that set up nothing of clusterctl's (manifests: the user's objects; none) are here. Each is
// registered in playbooks/networks.go, and its name is one of inventory.CNIPlugins.
package network

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/wait"
)

// Plugin is one pod network.
type Plugin interface {
	// Images are the images its Pods run on every node: their names in an artifacts manifest and their
	// upstream references (an artifacts pull fetches them; a run names them so).
	Images() []images.Image
	// Binaries are the CNI plugins every node needs in its CNI directory (bridge, host-local, ...).
	Binaries() []string
	// NodeFiles are the files every node gets with its own at the push (units that must be there at
	// boot).
	NodeFiles() []File
	// Check is preflight's word on the nodes (the run's with their facts, the inventory's others without):
	// findings of the check CheckName.
	Check(nodes []Node) []preflight.Finding
	// Apply is the network step, once every node of the run is registered with its pod range.
	Apply(ctx context.Context, env Env, c *Cluster) (Outcome, error)
	// Ready: up waits for the run's Nodes to be Ready (not with a network it does not set up).
	Ready() bool
	// Leftovers are what reset removes of it from a host.
	Leftovers() Leftovers
}

// Early is a plugin that can give nodes their network before every node is registered (the first
// control-plane node, while the workers join). c marks as in the run only the nodes to do now.
type Early interface {
	ApplyEarly(ctx context.Context, env Env, c *Cluster) error
}

// Staged is a plugin whose node's files need no other node's range: its routes need none, its CNI
// configuration only its own. The run writes each node's routes as soon as the node is pushed, and its
// configuration as soon as its Node has its range, while the other nodes still join (each node turns Ready
// as soon as it can); Apply then leaves the files of those nodes (Node.Done) alone. No node's files change
// when another joins: Apply writes none of the nodes outside the run (add-node, up --limit), and the run
// connects to none of them for it (their Node has no Facts).
type Staged interface {
	// Objects applies the network's objects (its Pods start on each node as it registers).
	Objects(ctx context.Context, env Env, c *Cluster) error
	// NodeRoutes writes a node's routes (before its range); NodeConfig its CNI configuration (n has its
	// range). Each runs once the one before it has ended on that node.
	NodeRoutes(ctx context.Context, env Env, c *Cluster, n Node, h apply.Host) (apply.Outcome, error)
	NodeConfig(ctx context.Context, c *Cluster, n Node, h apply.Host) (apply.Outcome, error)
}

// File is a file a node gets.
type File struct {
	Path string
	Data []byte
	Mode fs.FileMode
	Unit bool // a systemd unit: systemd reloads when it changes
	// Routes, of a unit, is the routes file it runs (`ip -batch`): when the kernel lacks one of its routes,
	// the push restarts the unit.
	Routes string
	// Networkd: systemd-networkd's configuration drop-in, which networkd reads only when it starts: the
	// push restarts networkd (where it runs) when it changed.
	Networkd bool
}

// CheckName is the preflight check of the pod network (--ignore-preflight-errors=PodNetwork).
const CheckName = "PodNetwork"

// Finding is an error of the pod network's check on host.
func Finding(host, format string, args ...any) preflight.Finding {
	return preflight.Finding{Host: host, Check: CheckName, Severity: preflight.SevError, Message: fmt.Sprintf(format, args...)}
}

// Leftovers are what reset removes of a pod network from a host.
type Leftovers = scripts.NetworkLeftovers

// Node is a node of the cluster that the inventory knows.
type Node struct {
	Host  string   // the inventory's name
	Name  string   // the Node's
	IP    string   // the node's address (inventory.Host.NodeIP)
	IPs   []string // its addresses, one of each family of the cluster, IP first (inventory.Host.NodeIPs)
	InRun bool     // acted on by this run; else the cluster's other node (add-node, up --limit)
	Facts *facts.Facts
	// PodCIDR is the range the controller-manager gave the Node ("" before); Reported is the InternalIP
	// the Node reports (its own word). PodCIDRs and ReportedIPs are all of them, one of each family on a
	// dual-stack cluster.
	PodCIDR, Reported     string
	PodCIDRs, ReportedIPs []string
	// Done: a node of the run whose routes and CNI configuration the run has written already (Staged).
	Done bool
}

// Cluster is what the network step knows of the cluster.
type Cluster struct {
	Inv *inventory.Inventory
	// Images are the run's (a plugin's image: Images.Ref of its name).
	Images images.Set
	// APIEndpoint is the URL nodes reach the API server at (the node-local proxy's, or the control-plane
	// endpoint): a network's own Pods use it, not the Service address, which works only once kube-proxy
	// has written its rules and, on a host without a default route, once the Service route is there.
	APIEndpoint string
	Nodes       []Node
	// Unknown are the cluster's Nodes that are no host of the inventory: name → pod ranges.
	Unknown map[string][]string
}

// Run is the nodes acted on.
func (c *Cluster) Run() []Node {
	var out []Node
	for _, n := range c.Nodes {
		if n.InRun {
			out = append(out, n)
		}
	}
	return out
}

// Env is what a plugin's step uses of the run.
type Env interface {
	Admin(ctx context.Context) (*apiclient.Client, error)
	// OnHosts runs fn on the named hosts at once, as the step's play (each host's outcome recorded).
	OnHosts(ctx context.Context, hosts []string, fn func(ctx context.Context, host string, h apply.Host) (apply.Outcome, error)) error
	Say(host, format string, args ...any)
	// Timeout bounds a wait for the cluster; Poll waits for check (every second, up to Timeout), saying
	// what it waits for every 10 s.
	Timeout() time.Duration
	Poll(ctx context.Context, check wait.Check) error
}

// Outcome is what the step reports beyond the hosts' changes.
type Outcome struct {
	// Skipped are nodes some of the network's state was not written for, with the reason, one a node.
	Skipped []string
}

// Manifests is cni.plugin manifests: the user's objects, applied as they are, in order.
type Manifests struct{}

func (Manifests) Images() []images.Image           { return nil }
func (Manifests) Binaries() []string               { return nil }
func (Manifests) NodeFiles() []File                { return nil }
func (Manifests) Check([]Node) []preflight.Finding { return nil }
func (Manifests) Ready() bool                      { return true }
func (Manifests) Leftovers() Leftovers             { return Leftovers{} }

// Apply applies the inventory's manifests.
func (Manifests) Apply(ctx context.Context, env Env, c *Cluster) (Outcome, error) {
	admin, err := env.Admin(ctx)
	if err != nil {
		return Outcome{}, err
	}
	for _, m := range c.Inv.Cluster.CNI.Manifests {
		file := c.Inv.Resolve(m)
		data, err := os.ReadFile(file)
		if err != nil {
			return Outcome{}, err
		}
		objs, err := apiclient.Decode(data)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", file, err)
		}
		if err := ApplyObjects(ctx, admin, env.Timeout(), file, objs); err != nil {
			return Outcome{}, err
		}
	}
	return Outcome{}, nil
}

// None is cni.plugin none: no pod network; nodes stay NotReady until the user installs one.
type None struct{}

func (None) Images() []images.Image           { return nil }
func (None) Binaries() []string               { return nil }
func (None) NodeFiles() []File                { return nil }
func (None) Check([]Node) []preflight.Finding { return nil }
func (None) Ready() bool                      { return false }
func (None) Leftovers() Leftovers             { return Leftovers{} }

// Apply says that there is nothing to apply.
func (None) Apply(_ context.Context, env Env, _ *Cluster) (Outcome, error) {
	env.Say("", "cni.plugin is none: nodes stay NotReady until a pod network is installed")
	return Outcome{}, nil
}

// APIEnv is the environment that points a Pod's in-cluster client (client-go's rest.InClusterConfig) at
// endpoint, a URL (Cluster.APIEndpoint); none for "": the Service address.
func APIEnv(endpoint string) ([]corev1.EnvVar, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("API endpoint %q: not https://HOST:PORT", endpoint)
	}
	return []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()}, {Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()}}, nil
}

// ApplyObjects applies objects (what: their file or name, in errors), retrying while the API server does
// not take them yet (a kind not served yet, the API server restarting), up to timeout.
func ApplyObjects(ctx context.Context, admin *apiclient.Client, timeout time.Duration, what string, objs []runtime.Object) error {
	err := wait.Retry(ctx, timeout, "the API server to take "+what, func() error {
		_, err := admin.Apply(ctx, objs...)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
