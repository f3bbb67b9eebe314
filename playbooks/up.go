package playbooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/addons"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/cni"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/kubeconfig"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/transport"
)

// UpOptions tune `clusterctl up`.
type UpOptions struct {
	StateDir  string
	Preflight PreflightOptions
	// APITimeout bounds the wait for the first API server; NodeTimeout the wait for nodes to be Ready.
	APITimeout  time.Duration
	NodeTimeout time.Duration
	// TokenTTL is the bootstrap token's lifetime; it is deleted as soon as the nodes have joined.
	TokenTTL time.Duration
	Now      func() time.Time
	// DryRun stops after render with the per-host plan: what would be uploaded, imported, started. Nothing on
	// the hosts is changed (the PKI is made or kept in the local state directory).
	DryRun bool
}

// UpResult is what `up` made.
type UpResult struct {
	Endpoint        string            `json:"endpoint"`
	AdminKubeconfig string            `json:"adminKubeconfig"`
	Nodes           []NodeStatus      `json:"nodes"`
	Phases          []PhaseTiming     `json:"phases"`
	Preflight       *PreflightReport  `json:"preflight,omitempty"`
	Unapproved      map[string]string `json:"unapprovedCSRs,omitempty"`
	// SkippedRoutes are the nodes whose pod routes were not written, with the reason (see cni.Vet).
	SkippedRoutes []string   `json:"skippedRoutes,omitempty"`
	Plan          []HostPlan `json:"plan,omitempty"`
	// BytesPushed is the file content written to hosts in this run (unchanged files cost nothing here).
	BytesPushed int64 `json:"bytesPushed"`
}

// HostPlan is what a dry run found would change on a host.
type HostPlan struct {
	Host    string        `json:"host"`
	Files   []PlannedFile `json:"files"`
	Actions []string      `json:"actions"`
}

// PlannedFile is one file a real run would write.
type PlannedFile struct {
	Path   string           `json:"path"`
	Change transport.Change `json:"change"`
	Size   int              `json:"size"`
}

// NodeStatus is one Node as `up` left it.
type NodeStatus struct {
	Name    string   `json:"name"`
	Roles   []string `json:"roles"`
	Ready   bool     `json:"ready"`
	Version string   `json:"version"`
	PodCIDR string   `json:"podCIDR,omitempty"`
}

// PhaseTiming is how long a phase of `up` took.
type PhaseTiming struct {
	Name       string `json:"name"`
	DurationMS int64  `json:"duration_ms"`
}

// ErrPreflight is returned when preflight found errors; the report is in the result.
var ErrPreflight = errors.New("preflight found errors")

// tokenFile keeps, in the state directory, the bootstrap token of a run until its nodes have joined.
const tokenFile = "bootstrap-token"

// up is one run of the playbook.
type up struct {
	e        *Env
	o        UpOptions
	inv      *inventory.Inventory
	res      *UpResult
	facts    map[string]*tasks.Facts
	nodeIPs  map[string]string
	rendered *render.Result
	manifest *artifacts.Manifest
	artDir   string
	// token is the bootstrap token, made only when a node has yet to join (nil otherwise).
	token *bootstrap.Token
	// joining are the hosts whose kubelet has no credentials yet: they join with the token.
	joining map[string]bool
	cp1     *inventory.Host
	admin   *apiclient.Client
	// restartKubelet: hosts whose kubelet files changed in this run.
	mu             sync.Mutex
	restartKubelet map[string]bool
	// approvedFor: nodes with an approved serving certificate request.
	approvedFor map[string]bool
	member      string
	renew       *render.Renewal // certs rotate
	// cps are the control-plane hosts the cluster has or gets in this run (nil: the inventory's).
	cps         []string
	images      images.Set
	art         map[string][]byte // artifact contents by manifest path
	kubeletPath string
}

// Up brings up a cluster on the inventory's hosts, kubeadm's way, in phases:
//
//	preflight      connect, gather facts, kubeadm's checks per role and across hosts
//	render         PKI, kubeconfigs, static Pods, kubelet and runtime configuration, made locally
//	push           every host's files, binaries and images (air-gapped), runtime configured
//	control-plane  the first control-plane node's kubelet starts etcd and the control plane
//	wait-api       until the API server is ready (kubelet and static Pods reported meanwhile)
//	bootstrap      through the API: RBAC, token, cluster-info, kubeadm-config, kube-proxy, CoreDNS
//	join           workers' kubelets start and TLS-bootstrap with the token
//	network        pod network: the bridge plugin with each node's range and routes, or the user's CNI
//	ready          serving certificates approved (after checks), all Nodes Ready, token deleted
//
// Every phase is idempotent; the state directory holds the PKI and the token between runs.
func Up(ctx context.Context, e *Env, o UpOptions) (*UpResult, error) {
	if o.APITimeout == 0 {
		o.APITimeout = 5 * time.Minute
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 5 * time.Minute
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	u := &up{e: e, o: o, inv: e.Inv, res: &UpResult{}, facts: map[string]*tasks.Facts{}, nodeIPs: map[string]string{},
		restartKubelet: map[string]bool{}}
	cps := e.Inv.ControlPlanes()
	if len(cps) == 0 {
		return nil, errors.New("the inventory has no control-plane host")
	}
	u.cp1 = cps[0]
	// The first control-plane node is always part of the run: the API is reached through it.
	if !slices.Contains(e.Hosts, u.cp1) {
		e.Hosts = append([]*inventory.Host{u.cp1}, e.Hosts...)
	}
	phases := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"preflight", u.preflight},
		{"render", u.render},
		{"push", u.push},
		{"control-plane", u.startControlPlane},
		{"wait-api", u.waitAPI},
		{"bootstrap", u.bootstrap},
		{"control-plane-join", u.joinControlPlanes},
		{"join", u.join},
		{"network", u.network},
		{"ready", u.ready},
	}
	if o.DryRun {
		phases = append(phases[:2], struct {
			name string
			fn   func(context.Context) error
		}{"plan", u.plan})
	}
	defer func() {
		for _, h := range e.Inv.Hosts {
			if c := e.Conn(h.Name); c != nil {
				u.res.BytesPushed += c.BytesWritten()
			}
		}
	}()
	for _, p := range phases {
		start := time.Now()
		u.emit(transport.Event{Type: transport.EventPhaseStart, Play: p.name})
		err := p.fn(ctx)
		d := time.Since(start)
		u.res.Phases = append(u.res.Phases, PhaseTiming{Name: p.name, DurationMS: d.Milliseconds()})
		done := transport.Event{Type: transport.EventPhaseDone, Play: p.name, DurationMS: d.Milliseconds()}
		if err != nil {
			done.Error = err.Error()
		}
		u.emit(done)
		if err != nil {
			return u.res, err
		}
	}
	return u.res, nil
}

func (u *up) say(play, host, format string, args ...any) {
	u.emit(transport.Event{Type: transport.EventMessage, Play: play, Host: host, Message: fmt.Sprintf(format, args...)})
}

func (u *up) emit(e transport.Event) {
	if u.e.Sink != nil {
		e.Time = time.Now()
		u.e.Sink.Emit(e)
	}
}

func (u *up) hostNames(hosts []*inventory.Host) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}

func (u *up) preflight(ctx context.Context) error {
	// Hosts marked with this cluster's CA (kept in the state directory; during a CA rotation, the old or the
	// new one) are re-runs: what clusterctl made there is expected.
	u.o.Preflight.Members = append(u.o.Preflight.Members, memberMarks(u.inv.Cluster.Name, u.o.StateDir)...)
	report, err := Preflight(ctx, u.e, u.o.Preflight)
	u.res.Preflight = report
	if err != nil {
		return err
	}
	if report.Failed() {
		return ErrPreflight
	}
	for _, h := range report.Hosts {
		u.facts[h.Name] = h.Facts
		u.nodeIPs[h.Name] = NodeIP(u.inv.Host(h.Name), h.Facts)
	}
	return nil
}

// localProxy reports whether the cluster's nodes reach the API servers through the node-local proxy.
func (u *up) localProxy() bool { return render.LocalProxyOf(u.inv, u.cps) }

// clusterControlPlanes finds, for a run on some of the hosts (add-node, --limit), the control-plane hosts
// of the cluster: those that are Nodes already and those joining now. Others the inventory lists are not
// part of it yet: they must not make the cluster's nodes use the node-local proxy, nor be its backends.
// Without an answer from the API (a cluster not up yet) every control-plane host of the inventory counts.
func (u *up) clusterControlPlanes(ctx context.Context) {
	if len(u.e.Hosts) == len(u.inv.Hosts) {
		return
	}
	admin, err := pki.ReadSecret(filepath.Join(u.o.StateDir, "admin.conf"))
	if err != nil {
		return
	}
	c, err := u.client(admin)
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes, err := c.Kube.CoreV1().Nodes().List(lctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		u.say("render", "", "the API does not answer (%s): every control-plane host of the inventory counts as the cluster's", firstLine(err.Error()))
		return
	}
	joined := map[string]bool{}
	for _, n := range nodes.Items {
		joined[n.Name] = true
	}
	u.cps = []string{}
	for _, h := range u.inv.ControlPlanes() {
		if joined[h.NodeName] || slices.Contains(u.e.Hosts, h) {
			u.cps = append(u.cps, h.Name)
		}
	}
}

func (u *up) render(ctx context.Context) error {
	c := u.inv.Cluster
	u.clusterControlPlanes(ctx)
	u.images = images.For(c.ImageRepository, c.KubernetesVersion)
	kubeletPath := "/usr/bin/kubelet"
	if c.Artifacts != "" {
		u.artDir = u.inv.Resolve(c.Artifacts)
		m, err := artifacts.Load(u.artDir)
		if err != nil {
			return fmt.Errorf("artifacts directory (cluster.artifacts): %w", err)
		}
		if m.KubernetesVersion != c.KubernetesVersion {
			return fmt.Errorf("artifacts directory %s holds Kubernetes %s, the inventory asks for %s", u.artDir, m.KubernetesVersion, c.KubernetesVersion)
		}
		u.manifest = m
		u.images = u.images.WithManifest(m, u.facts[u.cp1.Name].Arch)
		kubeletPath = kubeadm.Binary("kubelet")
	} else {
		for _, h := range u.e.Hosts {
			if f := u.facts[h.Name]; f != nil && !f.Commands["kubelet"] {
				return fmt.Errorf("%s has no kubelet: install the kubelet from your distribution's Kubernetes packages, or name an artifacts directory (cluster.artifacts) for clusterctl to push it", h.Name)
			}
		}
	}
	u.kubeletPath = kubeletPath
	if u.localProxy() {
		for _, h := range u.e.Hosts {
			if f := u.facts[h.Name]; f != nil && !f.Commands["haproxy"] {
				return fmt.Errorf("%s has no haproxy: with several control-plane nodes and no controlPlaneEndpoint, every node reaches the API servers through a node-local haproxy; install your distribution's haproxy package, or put a load balancer in front and set cluster.controlPlaneEndpoint", h.Name)
			}
		}
	}
	containerized := map[string]bool{}
	cniDir := ""
	for name, f := range u.facts {
		containerized[name] = f.Virt != ""
		if f.CNIBinDir != "" && cniDir == "" {
			cniDir = f.CNIBinDir
		}
		if c.CNI.Plugin == inventory.CNIBridge && f.CNIBinDir == "" {
			return fmt.Errorf("%s has no CNI plugins (bridge, host-local, portmap in /opt/cni/bin or /usr/lib/cni): install your distribution's CNI plugins package (containernetworking-plugins)", name)
		}
	}
	res, err := render.Render(render.Options{Inv: u.inv, StateDir: u.o.StateDir, Now: u.o.Now, Renew: u.renew, Images: u.images,
		KubeletPath: kubeletPath, NodeIPs: u.nodeIPs, Containerized: containerized, CNIBinDir: cniDir, ControlPlanes: u.cps})
	if err != nil {
		return err
	}
	u.rendered = res
	u.res.Endpoint = res.Endpoint
	u.res.AdminKubeconfig = filepath.Join(u.o.StateDir, "admin.conf")
	if abs, err := filepath.Abs(u.res.AdminKubeconfig); err == nil {
		u.res.AdminKubeconfig = abs
	}
	for _, ch := range res.Changes {
		u.say("render", "", "%s %s", ch.Action, ch.What)
	}
	u.joining = map[string]bool{}
	for _, h := range u.e.Hosts {
		if f := u.facts[h.Name]; f != nil && !h.Has(inventory.RoleControlPlane) && !f.Files[kubeadm.KubeletKubeconfig] {
			u.joining[h.Name] = true
		}
	}
	if len(u.joining) == 0 {
		return nil
	}
	return u.loadToken()
}

// loadToken keeps the token of an interrupted run while it has time left, or makes a new one; it is kept in
// the state directory (0600) so that a re-run joins with the same token.
func (u *up) loadToken() error {
	file := filepath.Join(u.o.StateDir, tokenFile)
	if data, err := os.ReadFile(file); err == nil {
		if t, err := bootstrap.ParseToken(string(data)); err == nil && t.Expires.Sub(u.o.Now()) > u.o.TokenTTL/2 {
			u.token = &t
			return nil
		}
	}
	t, err := bootstrap.NewToken(u.o.Now(), u.o.TokenTTL)
	if err != nil {
		return err
	}
	u.token = &t
	return writeSecret(file, t.Marshal())
}

func writeSecret(file string, data []byte) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// image is one image archive for a host.
type image struct {
	file, ref string
}

// push puts every host's files, and from an artifacts directory its binaries and images, then configures
// kernel settings and the runtime. Control-plane plays stop at the first failure; workers tolerate none
// either here, since a cluster missing a worker is not what was asked for.
func (u *up) push(ctx context.Context) error {
	if err := u.preparePush(); err != nil {
		return err
	}
	_, err := transport.Fanout(ctx, "push", u.hostNames(u.e.Hosts), transport.Policy{Limit: u.e.Forks}, u.e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			files, images, err := u.hostFiles(name)
			if err != nil {
				return false, err
			}
			// The membership mark goes first, alone: a host holding any of clusterctl's files is marked, so
			// that the preflight of a re-run after an interruption expects them.
			if _, err := u.e.Conn(name).Put(ctx, files[:1]); err != nil {
				return false, err
			}
			changed, err := u.e.Conn(name).Put(ctx, files[1:])
			if err != nil {
				return false, err
			}
			did := false
			ch := map[string]bool{}
			for i, f := range files[1:] {
				if changed[i] {
					ch[f.Path] = true
					did = true
				}
			}
			res, err := u.e.Conn(name).Run(ctx, "sh -s", []byte(setupScript(ch, images, u.localProxy())))
			if err != nil {
				return did, err
			}
			if strings.Contains(string(res.Stdout), "changed") {
				did = true
			}
			for p := range ch {
				if kubeletFile(p) {
					u.mu.Lock()
					u.restartKubelet[name] = true
					u.mu.Unlock()
				}
			}
			return did, nil
		})
	return err
}

// preparePush reads the artifacts (once, shared by every host's upload) and makes the membership mark.
func (u *up) preparePush() error {
	u.art = map[string][]byte{}
	if u.manifest != nil {
		for _, f := range u.manifest.Files {
			if f.Arch != "" && !u.archNeeded(f.Arch) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(u.artDir, filepath.FromSlash(f.Path)))
			if err != nil {
				return err
			}
			u.art[f.Path] = data
		}
	}
	ca, err := pki.ParseCert(u.caPEM())
	if err != nil {
		return err
	}
	u.member = MemberMark(u.inv.Cluster.Name, pki.CAHash(ca))
	return nil
}

// hostFiles is everything a host receives, the membership mark first, and the image archives to import.
func (u *up) hostFiles(name string) ([]transport.File, []image, error) {
	h := u.inv.Host(name)
	files := []transport.File{{Path: kubeadm.MemberPath, Data: []byte(u.member + "\n"), Mode: 0o644}}
	for _, hf := range u.rendered.Hosts {
		if hf.Host == name {
			files = append(files, hf.Files...)
		}
	}
	cp := h.Has(inventory.RoleControlPlane)
	if u.joining[name] {
		boot, err := bootstrap.BootstrapKubeconfig(u.inv.Cluster.Name, u.rendered.NodeEndpoint, u.caPEM(), *u.token)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, transport.File{Path: kubeadm.BootstrapKubeconfig, Data: boot, Mode: 0o600})
	}
	var images []image
	arch := u.facts[name].Arch
	if u.manifest != nil {
		for _, f := range u.manifest.Files {
			if f.Arch != arch || !needed(f, cp) {
				continue
			}
			switch f.Kind {
			case artifacts.KindBinary:
				files = append(files, transport.File{Path: kubeadm.Binary(f.Name), Data: u.art[f.Path], Mode: 0o755, SHA256: f.SHA256})
			case artifacts.KindImage:
				p := path.Join(kubeadm.ImagesDir, f.Name+".tar")
				files = append(files, transport.File{Path: p, Data: u.art[f.Path], Mode: 0o644, SHA256: f.SHA256})
				images = append(images, image{file: p, ref: f.Image})
			}
		}
	}
	for i := range files {
		files[i].Keep = mayPreexist(files[i].Path)
	}
	return files, images, nil
}

// mayPreexist tells the files a host may have had before clusterctl (a runtime's configuration, kernel
// settings, the kubelet's unit from a package, a binary in /usr/local/bin) from those that are clusterctl's
// alone (under /etc/kubernetes, the kubelet's and clusterctl's state, names that say clusterctl). Put keeps
// the originals of the first kind for reset to restore.
func mayPreexist(p string) bool {
	for _, own := range []string{"/etc/kubernetes/", "/var/lib/kubelet/", "/var/lib/clusterctl/"} {
		if strings.HasPrefix(p, own) {
			return false
		}
	}
	return !strings.Contains(path.Base(p), "clusterctl")
}

// plan finds, without changing anything on the hosts, what push and the phases after it would do.
func (u *up) plan(ctx context.Context) error {
	if err := u.preparePush(); err != nil {
		return err
	}
	plans := make([]HostPlan, len(u.e.Hosts))
	index := map[string]int{}
	for i, h := range u.e.Hosts {
		index[h.Name] = i
		plans[i] = HostPlan{Host: h.Name, Files: []PlannedFile{}, Actions: []string{}}
	}
	_, err := transport.Fanout(ctx, "plan", u.hostNames(u.e.Hosts), transport.Policy{Limit: u.e.Forks}, u.e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			files, images, err := u.hostFiles(name)
			if err != nil {
				return false, err
			}
			changes, err := u.e.Conn(name).Diff(ctx, files)
			if err != nil {
				return false, err
			}
			res, err := u.e.Conn(name).Run(ctx, "systemctl is-active kubelet 2>/dev/null; echo; ctr -n k8s.io images ls -q 2>/dev/null; true", nil)
			if err != nil {
				return false, err
			}
			state, imgs, _ := strings.Cut(string(res.Stdout), "\n\n")
			present := strings.Fields(imgs)
			p := &plans[index[name]]
			ch := map[string]bool{}
			for i, f := range files {
				if changes[i] != transport.ChangeNone {
					p.Files = append(p.Files, PlannedFile{Path: f.Path, Change: changes[i], Size: len(f.Data)})
					ch[f.Path] = true
				}
			}
			for _, im := range images {
				if ch[im.file] || !slices.Contains(present, im.ref) {
					p.Actions = append(p.Actions, "import image "+im.ref)
				}
			}
			if ch[kubeadm.ContainerdConfig] {
				p.Actions = append(p.Actions, "restart containerd")
			}
			kubeletChanged := false
			for f := range ch {
				kubeletChanged = kubeletChanged || kubeletFile(f)
			}
			switch {
			case strings.TrimSpace(state) != "active":
				p.Actions = append(p.Actions, "start kubelet")
			case kubeletChanged:
				p.Actions = append(p.Actions, "restart kubelet")
			}
			return len(p.Files)+len(p.Actions) > 0, nil
		})
	u.res.Plan = plans
	return err
}

func (u *up) archNeeded(arch string) bool {
	for _, f := range u.facts {
		if f.Arch == arch {
			return true
		}
	}
	return false
}

// needed says whether an artifact goes to a control-plane node (cp) or a worker: workers run the kubelet,
// kube-proxy, CoreDNS and the pause image; control-plane nodes also kubectl, etcdctl and the control plane.
func needed(f artifacts.File, cp bool) bool {
	switch f.Name {
	case "kubelet", "kube-proxy", "coredns", "pause":
		return f.Kind == artifacts.KindImage || f.Name == "kubelet"
	case "kubectl", "etcdctl":
		return cp && f.Kind == artifacts.KindBinary
	case "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd":
		return cp && f.Kind == artifacts.KindImage
	}
	return false
}

// kubeletFile reports whether a change to p needs the kubelet restarted.
func kubeletFile(p string) bool {
	switch p {
	case kubeadm.KubeletConfig, kubeadm.KubeletFlags, kubeadm.KubeletUnit, kubeadm.KubeletDropIn, kubeadm.BootstrapKubeconfig,
		kubeadm.KubeletKubeconfig, kubeadm.CACert, kubeadm.Binary("kubelet"):
		return true
	}
	return false
}

// setupScript applies what changed: kernel modules and settings, units, the runtime's configuration, image
// archives not yet imported. It prints "changed" when it changed anything.
// stampFunctions keep, in /var/lib/clusterctl/applied, the digest of the files each service last started
// with. A run killed between writing a file and restarting what reads it leaves the stamp behind the file,
// so the next run still restarts it; a run with nothing new restarts nothing.
const stampFunctions = `stamps=/var/lib/clusterctl/applied
mkdir -p $stamps
# stale NAME FILES...: the files differ from what NAME last applied (their digest is then kept for commit).
stale() { n=$1; shift; d=$(for f in "$@"; do [ -e "$f" ] && { printf '%s ' "$f"; sha256sum < "$f"; }; done | sha256sum | cut -d' ' -f1)
  [ "$(cat $stamps/$n 2>/dev/null)" != "$d" ] && echo "$d" > $stamps/$n.next; }
commit() { [ -f $stamps/$1.next ] && mv $stamps/$1.next $stamps/$1; true; }
`

// setupScript applies what the files need: kernel modules and settings, units, the runtime's configuration,
// image archives not yet imported. It prints "changed" when it changed anything.
func setupScript(changed map[string]bool, images []image, proxy bool) string {
	var b strings.Builder
	b.WriteString("set -e\n" + stampFunctions)
	b.WriteString("if stale modules /etc/modules-load.d/kubernetes.conf; then modprobe -a overlay br_netfilter 2>/dev/null || true; commit modules; echo changed; fi\n")
	b.WriteString("if stale sysctl /etc/sysctl.d/99-kubernetes.conf; then sysctl -q -p /etc/sysctl.d/99-kubernetes.conf; commit sysctl; echo changed; fi\n")
	b.WriteString(transport.Cmdf("if stale units %s %s; then systemctl daemon-reload; commit units; fi\n", kubeadm.KubeletUnit, kubeadm.KubeletDropIn))
	b.WriteString("if stale containerd /etc/containerd/config.toml; then systemctl restart containerd; commit containerd; echo changed; fi\n")
	if proxy {
		b.WriteString(transport.Cmdf("if stale apiproxy %s %s; then systemctl daemon-reload; systemctl enable -q %[3]s; systemctl restart %[3]s; commit apiproxy; echo changed; fi\n",
			render.LocalProxyConfigPath, render.LocalProxyUnitPath, render.LocalProxyUnitName))
	}
	b.WriteString("systemctl is-active -q containerd || { systemctl enable -q --now containerd; echo changed; }\n")
	// The runtime may have just started: wait for its socket (at most 30 s).
	b.WriteString("i=0; until ctr version >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 60 ] || { echo 'containerd does not answer' >&2; exit 1; }; sleep 0.5; done\n")
	for _, im := range images {
		if changed[im.file] {
			b.WriteString(transport.Cmdf("ctr -n k8s.io images import %s >/dev/null\necho changed\n", im.file))
			continue
		}
		b.WriteString(transport.Cmdf("ctr -n k8s.io images ls -q %s | grep -q . || { ctr -n k8s.io images import %s >/dev/null; echo changed; }\n", "name=="+im.ref, im.file))
	}
	b.WriteString("systemctl is-enabled -q kubelet || { systemctl enable -q kubelet; echo changed; }\n")
	return b.String()
}

// kubeletInputs are the files the kubelet starts with whose change needs a restart. The kubelet's own
// kubeconfig on workers is its to write (TLS bootstrap), and the bootstrap kubeconfig matters only before
// joining (a changed one restarts the kubelet through the run's change list).
func kubeletInputs(controlPlane bool, binary string) []string {
	in := []string{kubeadm.KubeletConfig, kubeadm.KubeletFlags, kubeadm.KubeletUnit, kubeadm.KubeletDropIn, kubeadm.CACert, binary}
	if controlPlane {
		in = append(in, kubeadm.KubeletKubeconfig)
	}
	return in
}

func (u *up) caPEM() []byte {
	for _, hf := range u.rendered.Hosts {
		for _, f := range hf.Files {
			if f.Path == kubeadm.CACert {
				return f.Data
			}
		}
	}
	return nil
}

// startKubelet starts the kubelet on hosts, restarting it where its files changed.
func (u *up) startKubelet(ctx context.Context, play string, hosts []string) error {
	_, err := transport.Fanout(ctx, play, hosts, transport.Policy{Limit: u.e.Forks}, u.e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			u.mu.Lock()
			restart := u.restartKubelet[name]
			u.mu.Unlock()
			// Restart when this run changed the kubelet's files, or a killed run changed them last; start
			// when it is not running; else leave it alone.
			h := u.inv.Host(name)
			if !h.Has(inventory.RoleControlPlane) {
				// A worker's kubelet.conf is the kubelet's own (TLS bootstrap); when the API endpoint nodes use
				// changes (a control plane grown to several, behind the node-local proxy), point it there.
				// Its CA data follows ca.crt (a bundle of the old and new CAs during a CA rotation).
				repointed, err := u.repointKubelet(ctx, name)
				if err != nil {
					return false, err
				}
				restart = restart || repointed
			}
			cmd := "set -e\n" + stampFunctions + "if stale kubelet " + transport.Args(kubeletInputs(h.Has(inventory.RoleControlPlane), u.kubeletPath)...) +
				fmt.Sprintf(" || [ %t = true ]; then systemctl restart kubelet; commit kubelet; echo restarted\n", restart) +
				"elif systemctl is-active -q kubelet; then echo running; else systemctl start kubelet; echo started; fi\n"
			res, err := u.e.Conn(name).Run(ctx, cmd, nil)
			if err != nil {
				return false, err
			}
			return strings.TrimSpace(string(res.Stdout)) != "running", nil
		})
	return err
}

// repointKubelet points a worker's kubelet.conf at the endpoint nodes use and the cluster's CA data, and
// reports whether it changed it. The file is read, changed and written back whole (atomically): nothing of
// it passes through a shell.
func (u *up) repointKubelet(ctx context.Context, name string) (bool, error) {
	conn := u.e.Conn(name)
	data, err := conn.Get(ctx, kubeadm.KubeletKubeconfig)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // not joined yet: the kubelet writes it from the bootstrap kubeconfig
	}
	if err != nil {
		return false, err
	}
	out, changed, err := kubeconfig.Repoint(data, u.rendered.NodeEndpoint, u.caPEM())
	if err != nil {
		return false, fmt.Errorf("%s: %s: %w", name, kubeadm.KubeletKubeconfig, err)
	}
	if !changed {
		return false, nil
	}
	_, err = conn.Put(ctx, []transport.File{{Path: kubeadm.KubeletKubeconfig, Data: out, Mode: 0o600}})
	return err == nil, err
}

func (u *up) startControlPlane(ctx context.Context) error {
	return u.startKubelet(ctx, "control-plane", []string{u.cp1.Name})
}

// client is a client of the first control-plane node's API server, dialled through its SSH connection.
func (u *up) client(kubeconfig []byte) (*apiclient.Client, error) {
	conn := u.e.Conn(u.cp1.Name)
	addr := fmt.Sprintf("%s:%d", u.nodeIPs[u.cp1.Name], u.inv.Cluster.APIServer.BindPort)
	if strings.Contains(u.nodeIPs[u.cp1.Name], ":") {
		addr = fmt.Sprintf("[%s]:%d", u.nodeIPs[u.cp1.Name], u.inv.Cluster.APIServer.BindPort)
	}
	return apiclient.New(kubeconfig, func(ctx context.Context, _, _ string) (net.Conn, error) {
		return conn.DialContext(ctx, "tcp", addr)
	})
}

// waitAPI waits for /readyz, reporting the kubelet's and the static Pods' state every 10 s, and on timeout
// says what the node shows.
func (u *up) waitAPI(ctx context.Context) error {
	superAdmin, err := pki.ReadSecret(filepath.Join(u.o.StateDir, "kubeconfig", "super-admin.conf"))
	if err != nil {
		return err
	}
	c, err := u.client(superAdmin)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(u.o.APITimeout)
	lastReport := time.Now()
	var last error
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		cancel()
		if err == nil {
			break
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server on %s is not ready after %s (last: %v)\n%s", u.cp1.Name, u.o.APITimeout, last, u.diagnose(ctx))
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			u.say("wait-api", u.cp1.Name, "%s", u.nodeState(ctx))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	// admin.conf's group becomes cluster-admin; everything after is done as admin.
	if _, err := c.Apply(ctx, bootstrap.Objects(nil, nil, nil)[0]); err != nil {
		return err
	}
	admin, err := pki.ReadSecret(u.res.AdminKubeconfig)
	if err != nil {
		return err
	}
	u.admin, err = u.client(admin)
	return err
}

// nodeState is a one-line summary of the kubelet and the Pods it runs on the first control-plane node.
func (u *up) nodeState(ctx context.Context) string {
	res, err := u.e.Conn(u.cp1.Name).Run(ctx, `printf 'kubelet %s; pods:' "$(systemctl is-active kubelet)"; `+
		`for d in /var/log/pods/*/; do [ -d "$d" ] || continue; n=${d%/}; n=${n##*/}; n=${n#*_}; printf ' %s' "${n%_*}"; done; echo`, nil)
	if err != nil {
		return "cannot read the node's state: " + err.Error()
	}
	return strings.TrimSpace(string(res.Stdout))
}

// diagnose gathers what explains an API server that does not come up: the kubelet's state and last log
// lines, and the last lines of etcd's and the API server's logs.
func (u *up) diagnose(ctx context.Context) string {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	res, err := u.e.Conn(u.cp1.Name).Run(dctx, `echo "== kubelet: $(systemctl is-active kubelet)"; journalctl -u kubelet -n 25 --no-pager 2>&1 | cut -c1-300
for c in etcd kube-apiserver; do for f in /var/log/pods/kube-system_${c}-*/${c}/*.log; do [ -e "$f" ] || continue; echo "== $f"; tail -n 15 "$f" | cut -c1-300; done; done`, nil)
	if err != nil {
		return "(cannot read the node's logs: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(res.Stdout))
}

// bootstrap creates, through the API, everything joining nodes and the cluster's addons need.
func (u *up) bootstrap(ctx context.Context) error {
	c := u.inv.Cluster
	caPEM := u.caPEM()
	var kubeletConf []byte
	for _, hf := range u.rendered.Hosts {
		if hf.Host == u.cp1.Name {
			for _, f := range hf.Files {
				if f.Path == kubeadm.KubeletConfig {
					kubeletConf = f.Data
				}
			}
		}
	}
	kc, err := bootstrap.KubeadmConfig(bootstrap.ClusterConfig{KubernetesVersion: c.KubernetesVersion, ClusterName: c.Name,
		ControlPlaneEndpoint: strings.TrimPrefix(u.rendered.NodeEndpoint, "https://"), PodSubnet: c.Networking.PodSubnet,
		ServiceSubnet: c.Networking.ServiceSubnet, DNSDomain: c.Networking.DNSDomain, ImageRepository: c.ImageRepository,
		EncryptionAlgorithm: c.Certificates.KeyAlgorithm, CertValidity: c.Certificates.Validity.Duration,
		CAValidity: c.Certificates.CAValidity.Duration, APIServerArgs: c.APIServer.ExtraArgs.Pairs(),
		ControllerManager: c.ControllerManager.ExtraArgs.Pairs(), SchedulerArgs: c.Scheduler.ExtraArgs.Pairs(),
		EtcdArgs: c.Etcd.ExtraArgs.Pairs(), CertSANs: c.APIServer.CertSANs})
	if err != nil {
		return err
	}
	infoKC, err := bootstrap.ClusterInfoKubeconfig(u.rendered.NodeEndpoint, caPEM)
	if err != nil {
		return err
	}
	var tokens []bootstrap.Token
	var objs []runtime.Object
	if u.token != nil {
		tokens = append(tokens, *u.token)
		objs = append(objs, u.token.Object())
	}
	info, err := bootstrap.ClusterInfo(infoKC, tokens...)
	if err != nil {
		return err
	}
	objs = append(objs, bootstrap.Objects(kc, bootstrap.KubeletConfig(kubeletConf), info)...)

	containerized := false
	for _, f := range u.facts {
		containerized = containerized || f.Virt != ""
	}
	dnsIP, err := kubelet.NthIP(c.Networking.ServiceSubnet, 10)
	if err != nil {
		return err
	}
	p := addons.Params{Endpoint: u.rendered.NodeEndpoint, ImageRepository: c.ImageRepository,
		KubeProxyImage: u.images.Ref(images.Proxy), CoreDNSImage: u.images.Ref(images.CoreDNS),
		ClusterCIDR: c.Networking.PodSubnet, DNSDomain: c.Networking.DNSDomain, DNSServiceIP: dnsIP,
		NoConntrackTuning: containerized, KubeProxyArgs: c.KubeProxy.ExtraArgs.Pairs()}
	proxy, err := addons.KubeProxy(p)
	if err != nil {
		return err
	}
	objs = append(objs, proxy...)
	objs = append(objs, addons.CoreDNS(p)...)
	applied, err := u.admin.Apply(ctx, objs...)
	if err != nil {
		return err
	}
	n := 0
	for _, a := range applied {
		if a.Changed {
			n++
		}
	}
	u.say("bootstrap", "", "%d objects applied, %d changed", len(applied), n)
	return u.label(ctx, u.cp1)
}

// label sets a node's role label and the inventory's labels and taints, once it is registered.
func (u *up) label(ctx context.Context, h *inventory.Host) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := u.admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // not registered yet: the ready phase labels it
		}
		if err != nil {
			return err
		}
		want := map[string]string{}
		taints := []corev1.Taint{}
		if h.Has(inventory.RoleControlPlane) {
			want[bootstrap.ControlPlaneLabel] = ""
			want[bootstrap.ExcludeFromLBLabel] = ""
			if !h.Has(inventory.RoleWorker) {
				taints = append(taints, corev1.Taint{Key: bootstrap.ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule})
			}
		}
		for k, v := range h.Labels {
			want[k] = v
		}
		for _, t := range h.Taints {
			taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
		update := false
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		for k, v := range want {
			if cur, ok := node.Labels[k]; !ok || cur != v {
				node.Labels[k] = v
				update = true
			}
		}
		for _, t := range taints {
			if !slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
				node.Spec.Taints = append(node.Spec.Taints, t)
				update = true
			}
		}
		if !update {
			return nil
		}
		_, err = u.admin.Kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: apiclient.FieldManager})
		return err
	})
}

// joinControlPlanes joins the other control-plane nodes one at a time, as kubeadm join --control-plane:
// the node's etcd member is added as a learner through the etcd API before the member starts, the node's
// kubelet starts etcd and the control plane, the learner is promoted once it has caught up, and the node's
// API server must be ready before the next node. Members already there are left alone.
func (u *up) joinControlPlanes(ctx context.Context) error {
	var joining []*inventory.Host
	for _, h := range u.e.Hosts {
		if h.Has(inventory.RoleControlPlane) && h != u.cp1 {
			joining = append(joining, h)
		}
	}
	if len(joining) == 0 {
		return nil
	}
	ec, err := u.etcdClient()
	if err != nil {
		return err
	}
	defer ec.Close()
	for _, h := range joining {
		ip := u.nodeIPs[h.Name]
		peer := "https://" + net.JoinHostPort(ip, strconv.Itoa(kubeadm.PortEtcdPeer))
		m, added, err := ec.AddLearner(ctx, peer)
		if err != nil {
			return fmt.Errorf("%s: adding its etcd member: %w", h.Name, err)
		}
		if added {
			u.say("control-plane-join", h.Name, "etcd member %x added as a learner (%s)", m.ID, peer)
		}
		if err := u.startKubelet(ctx, "control-plane-join", []string{h.Name}); err != nil {
			return err
		}
		if m.Learner {
			if err := ec.Promote(ctx, m.ID, u.o.APITimeout); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			u.say("control-plane-join", h.Name, "etcd member %x promoted to voting member", m.ID)
		}
		if err := u.waitNodeAPI(ctx, h); err != nil {
			return err
		}
		members, err := ec.List(ctx)
		if err != nil {
			return err
		}
		if err := etcdmember.Quorum(members); err != nil {
			return fmt.Errorf("after joining %s: %w", h.Name, err)
		}
		if err := u.label(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// etcdClient reaches the first control-plane node's etcd through its SSH connection, as its API server does.
func (u *up) etcdClient() (*etcdmember.Client, error) {
	pkiDir := filepath.Join(u.o.StateDir, "pki")
	read := func(p ...string) ([]byte, error) {
		return os.ReadFile(filepath.Join(append([]string{pkiDir}, p...)...))
	}
	ca, err := read("etcd", "ca.crt")
	if err != nil {
		return nil, err
	}
	cert, err := read("nodes", u.cp1.NodeName, "apiserver-etcd-client.crt")
	if err != nil {
		return nil, err
	}
	key, err := read("nodes", u.cp1.NodeName, "apiserver-etcd-client.key")
	if err != nil {
		return nil, err
	}
	conn := u.e.Conn(u.cp1.Name)
	endpoint := "https://" + net.JoinHostPort(u.nodeIPs[u.cp1.Name], strconv.Itoa(kubeadm.PortEtcdClient))
	return etcdmember.New(endpoint, ca, cert, key, func(ctx context.Context, addr string) (net.Conn, error) {
		return conn.DialContext(ctx, "tcp", addr)
	})
}

// waitNodeAPI waits for a control-plane node's own API server to be ready, through its SSH connection.
func (u *up) waitNodeAPI(ctx context.Context, h *inventory.Host) error {
	admin, err := pki.ReadSecret(u.res.AdminKubeconfig)
	if err != nil {
		return err
	}
	conn := u.e.Conn(h.Name)
	addr := net.JoinHostPort(u.nodeIPs[h.Name], strconv.Itoa(u.inv.Cluster.APIServer.BindPort))
	c, err := apiclient.NewForServer(admin, "https://"+addr, func(ctx context.Context, _, _ string) (net.Conn, error) { return conn.DialContext(ctx, "tcp", addr) })
	if err != nil {
		return err
	}
	return u.poll(ctx, "api", h.Name, u.o.APITimeout, func() (bool, string, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx); err != nil {
			return false, fmt.Sprintf("the API server on %s (last: %v)", h.Name, err), nil
		}
		return true, "", nil
	})
}

// poll calls check every second until it is done, saying every 10 s what it waits for, and fails saying
// so after timeout. An error from check ends the wait.
func (u *up) poll(ctx context.Context, play, host string, timeout time.Duration, check func() (done bool, waiting string, err error)) error {
	deadline := time.Now().Add(timeout)
	lastReport := time.Now()
	for {
		done, waiting, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, still waiting for %s", timeout, waiting)
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			u.say(play, host, "waiting for %s", waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// join starts the workers' kubelets, which TLS-bootstrap with the token; the controller-manager approves
// their client certificates.
func (u *up) join(ctx context.Context) error {
	workers := u.hostNames(u.workers())
	if len(workers) == 0 {
		return nil
	}
	return u.startKubelet(ctx, "join", workers)
}

func (u *up) workers() []*inventory.Host {
	var out []*inventory.Host
	for _, h := range u.e.Hosts {
		if !h.Has(inventory.RoleControlPlane) {
			out = append(out, h)
		}
	}
	return out
}

// waitNodes polls the Nodes until done says they are as wanted, approving serving CSRs and labelling nodes
// as they come.
func (u *up) waitNodes(ctx context.Context, play string, timeout time.Duration, done func(map[string]*corev1.Node) (bool, string)) error {
	labelled := map[string]bool{}
	return u.poll(ctx, play, "", timeout, func() (bool, string, error) {
		if err := u.approve(ctx); err != nil {
			return false, "", err
		}
		list, err := u.admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		nodes := map[string]*corev1.Node{}
		for i := range list.Items {
			nodes[list.Items[i].Name] = &list.Items[i]
		}
		for _, h := range u.e.Hosts {
			if nodes[h.NodeName] != nil && !labelled[h.Name] {
				if err := u.label(ctx, h); err != nil {
					return false, "", err
				}
				labelled[h.Name] = true
			}
		}
		ok, waiting := done(nodes)
		return ok, waiting, nil
	})
}

// network sets up the pod network: with the bridge plugin, once every node is registered with its pod range,
// each node's CNI configuration and routes to the others; with manifests, the user's objects.
func (u *up) network(ctx context.Context) error {
	switch u.inv.Cluster.CNI.Plugin {
	case inventory.CNINone:
		u.say("network", "", "cni.plugin is none: nodes stay NotReady until a pod network is installed")
		return nil
	case inventory.CNIManifests:
		for _, m := range u.inv.Cluster.CNI.Manifests {
			file := u.inv.Resolve(m)
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			objs, err := apiclient.Decode(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if _, err := u.admin.Apply(ctx, objs...); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
		}
		return nil
	}
	var cidrs map[string]string
	err := u.waitNodes(ctx, "network", u.o.NodeTimeout, func(nodes map[string]*corev1.Node) (bool, string) {
		cidrs = map[string]string{}
		var missing []string
		for _, h := range u.e.Hosts {
			n := nodes[h.NodeName]
			switch {
			case n == nil:
				missing = append(missing, h.NodeName+" (not registered)")
			case n.Spec.PodCIDR == "":
				missing = append(missing, h.NodeName+" (no pod range)")
			default:
				cidrs[h.Name] = n.Spec.PodCIDR
			}
		}
		return len(missing) == 0, "nodes: " + strings.Join(missing, ", ")
	})
	if err != nil {
		return err
	}
	// Every node of the cluster routes to every other's range: the nodes acted on get the whole
	// configuration, the cluster's other nodes (add-node, up --limit) only their routes unit, a file of a few
	// hundred bytes and a oneshot unit; no Pod or kubelet restarts.
	list, err := u.admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var all []cni.Node
	targets := map[string]bool{}
	for _, h := range u.e.Hosts {
		targets[h.Name] = true
	}
	var others []*inventory.Host
	for i := range list.Items {
		n := &list.Items[i]
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && ip == "" {
				ip = a.Address
			}
		}
		all = append(all, cni.Node{Name: n.Name, PodCIDR: n.Spec.PodCIDR, IP: ip})
		for j := range u.inv.Hosts {
			if h := &u.inv.Hosts[j]; h.NodeName == n.Name && !targets[h.Name] {
				others = append(others, h)
			}
		}
	}
	if len(others) > 0 {
		if _, err := Connect(ctx, u.e, others, 0); err != nil {
			return err
		}
	}
	// Routes only to nodes that are the inventory's hosts at the inventory's addresses.
	expect := map[string]string{}
	for _, h := range append(slices.Clone(u.e.Hosts), others...) {
		ip := NodeIP(h, u.facts[h.Name])
		if ip == "" {
			f, err := factsOf(ctx, u.e, h)
			if err != nil {
				return err
			}
			ip = NodeIP(h, f)
		}
		expect[h.NodeName] = ip
	}
	all, skipped := cni.Vet(all, expect, u.inv.Cluster.Networking.PodSubnet)
	for _, msg := range skipped {
		u.say("network", "", "%s", msg)
	}
	u.res.SkippedRoutes = skipped
	hosts := append(u.hostNames(u.e.Hosts), u.hostNames(others)...)
	_, err = transport.Fanout(ctx, "network", hosts, transport.Policy{Limit: u.e.Forks}, u.e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			nodeName := u.inv.Host(name).NodeName
			unit, err := cni.RoutesUnit(nodeName, all)
			if err != nil {
				return false, err
			}
			files := []transport.File{{Path: cni.RoutesUnitPath, Data: unit, Mode: 0o644}}
			if targets[name] {
				conf, err := cni.Config(cidrs[name])
				if err != nil {
					return false, err
				}
				files = append(files, transport.File{Path: cni.ConfigPath, Data: conf, Mode: 0o644})
			}
			changed, err := u.e.Conn(name).Put(ctx, files)
			if err != nil {
				return false, err
			}
			cmd := "set -e\n" + stampFunctions + "if stale routes " + cni.RoutesUnitPath + "; then systemctl daemon-reload; systemctl enable -q " +
				cni.RoutesUnitName + "; systemctl restart " + cni.RoutesUnitName + "; commit routes; echo changed; fi\n"
			res, err := u.e.Conn(name).Run(ctx, cmd, nil)
			if err != nil {
				return false, err
			}
			return slices.Contains(changed, true) || strings.Contains(string(res.Stdout), "changed"), nil
		})
	return err
}

// ready waits for every Node to be Ready with its serving certificate approved, deletes the token and
// reports the nodes.
func (u *up) ready(ctx context.Context) error {
	if u.inv.Cluster.CNI.Plugin == inventory.CNINone {
		u.say("ready", "", "not waiting for Ready nodes: no pod network")
	} else {
		err := u.waitNodes(ctx, "ready", u.o.NodeTimeout, func(nodes map[string]*corev1.Node) (bool, string) {
			var waiting []string
			for _, h := range u.e.Hosts {
				n := nodes[h.NodeName]
				if n == nil || !nodeReady(n) {
					waiting = append(waiting, h.NodeName+" (not Ready)")
				} else if !u.servingApproved(h.NodeName) {
					waiting = append(waiting, h.NodeName+" (no serving certificate)")
				}
			}
			return len(waiting) == 0, "nodes: " + strings.Join(waiting, ", ")
		})
		if err != nil {
			return err
		}
		if err := u.waitAddons(ctx); err != nil {
			return err
		}
	}
	// The token has done its job.
	if u.token != nil {
		err := u.admin.Kube.CoreV1().Secrets(bootstrap.KubeSystem).Delete(ctx, u.token.SecretName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := os.Remove(filepath.Join(u.o.StateDir, tokenFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	list, err := u.admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		var roles []string
		for k := range n.Labels {
			if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok {
				roles = append(roles, r)
			}
		}
		slices.Sort(roles)
		u.res.Nodes = append(u.res.Nodes, NodeStatus{Name: n.Name, Roles: roles, Ready: nodeReady(&n),
			Version: n.Status.NodeInfo.KubeletVersion, PodCIDR: n.Spec.PodCIDR})
	}
	return nil
}

// waitAddons waits for kube-proxy on every node and CoreDNS to be available: name resolution is part of a
// working cluster.
func (u *up) waitAddons(ctx context.Context) error {
	err := u.poll(ctx, "ready", "", u.o.NodeTimeout, func() (bool, string, error) {
		var waiting []string
		ds, err := u.admin.Kube.AppsV1().DaemonSets(bootstrap.KubeSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberAvailable < ds.Status.DesiredNumberScheduled {
			waiting = append(waiting, fmt.Sprintf("kube-proxy (%d/%d available)", ds.Status.NumberAvailable, ds.Status.DesiredNumberScheduled))
		}
		dep, err := u.admin.Kube.AppsV1().Deployments(bootstrap.KubeSystem).Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if dep.Status.AvailableReplicas < 1 {
			waiting = append(waiting, fmt.Sprintf("CoreDNS (%d/%d available)", dep.Status.AvailableReplicas, *dep.Spec.Replicas))
		}
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w (kubectl -n kube-system get pods shows why)", err)
	}
	return err
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// servingApproved reports whether the node has an approved (or issued) kubelet serving request.
func (u *up) servingApproved(node string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.approvedFor[node]
}

// approve approves every pending kubelet serving CSR that passes csr.CheckServing; others are left pending
// and reported once each.
func (u *up) approve(ctx context.Context) error {
	list, err := u.admin.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes := map[string]csr.Node{}
	for i := range u.inv.Hosts {
		h := &u.inv.Hosts[i]
		n := csr.Node{Name: h.NodeName, DNSNames: []string{h.NodeName}}
		if h.Name != h.NodeName {
			n.DNSNames = append(n.DNSNames, h.Name)
		}
		for _, a := range []string{u.nodeIPs[h.Name], h.InternalAddress, h.Address} {
			if a != "" && !slices.Contains(n.Addresses, a) {
				n.Addresses = append(n.Addresses, a)
			}
		}
		nodes[h.NodeName] = n
	}
	u.mu.Lock()
	if u.approvedFor == nil {
		u.approvedFor = map[string]bool{}
	}
	if u.res.Unapproved == nil {
		u.res.Unapproved = map[string]string{}
	}
	u.mu.Unlock()
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.SignerName != certificatesv1.KubeletServingSignerName {
			continue
		}
		node := strings.TrimPrefix(r.Spec.Username, "system:node:")
		if !csr.Pending(r) {
			if isApproved(r) && csr.CheckServing(r, nodes) == "" {
				u.mu.Lock()
				u.approvedFor[node] = true
				u.mu.Unlock()
			}
			continue
		}
		if why := csr.CheckServing(r, nodes); why != "" {
			u.mu.Lock()
			_, seen := u.res.Unapproved[r.Name]
			u.res.Unapproved[r.Name] = why
			u.mu.Unlock()
			if !seen {
				u.say("approve", "", "left %s unapproved: %s", r.Name, why)
			}
			continue
		}
		r.Status.Conditions = append(r.Status.Conditions, csr.Approved("requester and every name and address checked against the inventory by clusterctl"))
		if _, err := u.admin.Kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, r, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue // changed meanwhile: the next round sees it
			}
			return err
		}
		u.say("approve", "", "approved serving certificate of %s (%s)", node, r.Name)
		u.mu.Lock()
		u.approvedFor[node] = true
		u.mu.Unlock()
	}
	return nil
}

func isApproved(r *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range r.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return true
		}
	}
	return false
}
