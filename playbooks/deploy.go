package playbooks

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/snapshots"
	"github.com/clusterctl/clusterctl/transport"
)

// newDeployment makes a run's deployment on hosts, and the plan its first step takes: the run's hosts;
// the first control-plane host is always one of them: the API is reached through it.
func newDeployment(e *Env, hosts []*inventory.Host, o deployOptions) (*deployment, *plan, error) {
	cp1, err := e.firstControlPlane()
	if err != nil {
		return nil, nil, err
	}
	o.Now = clockOr(o.Now)
	if !slices.Contains(hosts, cp1) {
		hosts = append([]*inventory.Host{cp1}, hosts...)
	}
	d := &deployment{e: e, o: o, rec: &recorder{restartKubelet: map[string]bool{}, outcomes: map[string]*apply.Outcome{}}}
	return d, &plan{hosts: hosts, cp1: cp1, net: networkOf(e.Inv), facts: map[string]*facts.Facts{}, nodeIPs: map[string]inventory.NodeAddrs{}}, nil
}

// preflight runs the preflight playbook on the plan's hosts and returns the plan with their facts and
// addresses. Hosts marked with this cluster's CA are re-runs: what clusterctl made there is expected.
func (d *deployment) preflight(ctx context.Context, p *plan, o PreflightOptions) (*PreflightReport, *plan, error) {
	o.Hosts = p.hosts
	o.Members = append(o.Members, memberMarks(d.e.Inv.Cluster.Name, d.e.StateDir)...)
	report, err := Preflight(ctx, d.e, o)
	if err != nil {
		return report, nil, err
	}
	if report.Failed() {
		return report, nil, ErrPreflight
	}
	facts, ips := map[string]*facts.Facts{}, map[string]inventory.NodeAddrs{}
	for _, h := range report.Hosts {
		facts[h.Name] = h.Facts
		ips[h.Name] = d.e.Inv.Host(h.Name).NodeIPs(h.Facts.NodeIPs())
	}
	p = p.with(func(p *plan) { p.facts, p.nodeIPs = facts, ips })
	recorded, err := d.learnAddresses(p)
	if err != nil {
		return report, nil, err
	}
	nodes, reserved := csr.Fleet(d.e.Inv, p.nodeIPs, recorded)
	d.approver = &csr.Approver{Nodes: nodes, Reserved: reserved, Say: func(f string, a ...any) { d.e.say("approve", "", f, a...) }}
	return report, p, nil
}

// learnAddresses records in the state directory, the first time, the addresses learned from the run's
// hosts (a dry run records nothing), names on the run's output those another host has, and returns the
// record of every run's.
func (d *deployment) learnAddresses(p *plan) (csr.Learned, error) {
	recorded, err := csr.LoadLearned(d.e.StateDir)
	if err != nil {
		return nil, err
	}
	known := maps.Clone(recorded)
	changed, conflicts := recorded.Learn(d.e.Inv, p.nodeIPs)
	for _, c := range conflicts {
		d.e.say("approve", "", "%s: its kubelet gets no serving certificate for it", c)
	}
	if changed && !d.o.DryRun {
		if err := recorded.Save(d.e.StateDir); err != nil {
			return nil, err
		}
	}
	return known, nil
}

// clusterControlPlanes finds, for a run on some of the hosts (add-node, --limit), the control-plane hosts
// of the cluster: those that are Nodes already and those joining now. Others the inventory lists are not
// part of it yet: they must not make the cluster's nodes use the node-local proxy, nor be its backends.
// Without an answer from the API (a cluster not up yet) every control-plane host of the inventory counts.
func (d *deployment) clusterControlPlanes(ctx context.Context, p *plan) []string {
	if len(p.hosts) == len(d.e.Inv.Hosts) {
		return nil
	}
	c, err := d.e.Admin(ctx)
	if err != nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := c.Kube.CoreV1().Nodes().List(lctx, metav1.ListOptions{LabelSelector: bootstrap.ControlPlaneLabel})
	if err != nil {
		d.e.say("render", "", "the API does not answer (%s): every control-plane host of the inventory counts as the cluster's", firstLine(err.Error()))
		return nil
	}
	joined := map[string]bool{}
	for _, n := range list.Items {
		joined[n.Name] = true
	}
	cps := []string{}
	for _, h := range d.e.Inv.ControlPlanes() {
		if joined[h.NodeName] || slices.Contains(p.hosts, h) {
			cps = append(cps, h.Name)
		}
	}
	return cps
}

// render makes, in the state directory and in memory, every file of every host: PKI, kubeconfigs, static
// Pods, kubelet and runtime configuration; and the token when a node has yet to join. The run's plan is
// then the rendered one.
func (d *deployment) render(ctx context.Context, p *plan) (*plan, error) {
	cps := d.clusterControlPlanes(ctx, p)
	art, err := d.artifacts(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := d.hostsHaveWhatTheyNeed(p); err != nil {
		return nil, err
	}
	containerized := map[string]bool{}
	etcdIDs, hostnames := map[string][2]int{}, map[string]string{}
	cniDir := ""
	for name, f := range p.facts {
		containerized[name] = f.Virt != ""
		hostnames[name] = f.Hostname
		if uid, gid, ok := f.Accounts.EtcdIDs(); ok {
			etcdIDs[name] = [2]int{uid, gid}
		}
		if f.CNIBinDir != "" && cniDir == "" {
			cniDir = f.CNIBinDir
		}
	}
	if d.e.Inv.Cluster.InstallsRuntime() {
		cniDir = kubeadm.CNIBinDir
	}
	reg, err := d.registry()
	if err != nil {
		return nil, err
	}
	etcdJoin, etcdMembers, err := d.etcdMembership(ctx, p)
	if err != nil {
		return nil, err
	}
	stateDir := d.e.StateDir
	if d.o.PKIDir != "" {
		stateDir = d.o.PKIDir
	}
	res, err := render.Render(render.Options{Registry: reg, Inv: d.e.Inv, StateDir: stateDir, Now: d.o.Now, Renew: d.o.Renew, Images: art.images,
		KubeletPath: art.kubeletPath, NodeIPs: p.nodeIPs, Containerized: containerized, CNIBinDir: cniDir, ControlPlanes: cps, NetworkFiles: p.net.NodeFiles(),
		InstallRuntime: d.e.Inv.Cluster.InstallsRuntime(), EtcdJoin: etcdJoin, EtcdMembers: etcdMembers, EtcdIDs: etcdIDs, Hostnames: hostnames})
	if err != nil {
		return nil, err
	}
	for _, ch := range res.Changes {
		d.e.say("render", "", "%s %s", ch.Action, ch.What)
	}
	ca, err := pki.ParseCert(caOf(res))
	if err != nil {
		return nil, err
	}
	joining := map[string]bool{}
	for _, h := range p.hosts {
		if f := p.facts[h.Name]; f != nil && h.IsNode() && !h.Has(inventory.RoleControlPlane) && !f.Files[kubeadm.KubeletKubeconfig] {
			joining[h.Name] = true
		}
	}
	p = p.with(func(p *plan) {
		p.cps, p.artifactSet, p.etcdJoin, p.etcdMembers, p.rendered, p.joining = cps, art, etcdJoin, etcdMembers, res, joining
		p.member = MemberMark(d.e.Inv.Cluster.Name, pki.CAHash(ca))
	})
	return p, d.loadTokens(p)
}

// prepare checks the artifacts the hosts need: each there, of its manifest's size (they are streamed from
// disk at upload, each checked against its manifest's digest on the way).
func (d *deployment) prepare(p *plan) error {
	if p.manifest != nil {
		for _, f := range p.manifest.Files {
			if f.Arch != "" && !d.archNeeded(p, f.Arch) {
				continue
			}
			if !d.neededByAny(p, f) {
				continue
			}
			st, err := os.Stat(d.artifact(p, f))
			if err != nil {
				return err
			}
			if st.Size() != f.Size || !st.Mode().IsRegular() {
				return fmt.Errorf("artifacts directory %s: %s does not match its manifest (%d bytes, manifest says %d); clusterctl artifacts verify %s lists every such file",
					p.artDir, f.Path, st.Size(), f.Size, p.artDir)
			}
		}
	}
	return nil
}

// node is everything a host receives: the membership mark, its rendered files, the bootstrap kubeconfig
// when it joins, and from an artifacts directory its binaries and image archives.
func (d *deployment) node(p *plan, name string) (apply.Node, error) {
	h := d.e.Inv.Host(name)
	n := apply.Node{Mark: transport.File{Path: kubeadm.MemberPath, Data: []byte(p.member + "\n"), Mode: 0o644}, Dry: d.o.DryRun,
		EtcdUnit: d.e.Inv.ExternalEtcd() && h.Has(inventory.RoleEtcd), EtcdOnly: !h.IsNode()}
	for _, f := range p.net.NodeFiles() {
		if f.Unit {
			n.NetworkUnits = append(n.NetworkUnits, f.Path)
		}
		if f.Unit && f.Routes != "" {
			n.PodRoutes, n.PodRoutesUnit = f.Routes, path.Base(f.Path)
		}
		if f.Networkd {
			n.Networkd = f.Path
		}
	}
	for _, hf := range p.rendered.Hosts {
		if hf.Host == name {
			n.Files = append(n.Files, hf.Files...)
		}
	}
	if t, ok := d.tokens[name]; ok && p.joining[name] {
		boot, err := bootstrap.BootstrapKubeconfig(d.e.Inv.Cluster.Name, p.rendered.NodeEndpoint, p.caPEM(), t)
		if err != nil {
			return n, err
		}
		n.Files = append(n.Files, transport.File{Path: kubeadm.BootstrapKubeconfig, Data: boot, Mode: 0o600})
	}
	if p.manifest != nil {
		for _, f := range p.manifest.Files {
			if f.Arch != p.facts[name].Arch || !d.needed(p, f, h) {
				continue
			}
			switch f.Kind {
			case artifacts.KindBinary:
				n.Files = append(n.Files, d.artifactFile(p, f, kubeadm.Binary(f.Name), 0o755))
			case artifacts.KindRuntime:
				at := kubeadm.RuntimeBinary(f.Name)
				n.Files = append(n.Files, d.artifactFile(p, f, at, 0o755))
				if f.Name != "ctr" && f.Name != "crictl" {
					n.Runtime = append(n.Runtime, at)
				}
			case artifacts.KindCNI:
				n.Files = append(n.Files, d.artifactFile(p, f, kubeadm.CNIPlugin(f.Name), 0o755))
			case artifacts.KindImage:
				at := path.Join(kubeadm.ImagesDir, f.Name+".tar")
				n.Files = append(n.Files, d.artifactFile(p, f, at, 0o644))
				im := scripts.Image{File: at, Ref: f.Image}
				if f.Format == archive.Format && f.Digest != "" {
					im.Pinned = archive.DigestName(f.Image, f.Digest)
				}
				n.Images = append(n.Images, im)
			}
		}
	}
	n.Snapshots = slices.ContainsFunc(n.Files, func(f transport.File) bool { return f.Path == snapshots.TimerPath })
	if d.keep != nil {
		n.Files = slices.DeleteFunc(n.Files, func(f transport.File) bool { return !d.keep(f.Path) })
		n.Images = slices.DeleteFunc(n.Images, func(im scripts.Image) bool { return !d.keep(im.File) })
		n.Partial = true
	}
	for i := range n.Files {
		n.Files[i].Keep = apply.MayPreexist(n.Files[i].Path)
		n.Files[i].Previous = d.previous
	}
	return n, nil
}

// hostPlans are what the run changed, or would change, on each of its hosts.
func (d *deployment) hostPlans(p *plan) []HostPlan {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	out := make([]HostPlan, 0, len(p.hosts))
	for _, h := range p.hosts {
		p := HostPlan{Host: h.Name, Files: []PlannedFile{}, Actions: []string{}}
		if o := d.rec.outcomes[h.Name]; o != nil {
			p.Files = append(p.Files, o.Files...)
			p.Actions = append(p.Actions, o.Actions...)
		}
		out = append(out, p)
	}
	return out
}

// push puts hosts' files and applies them, limit hosts at once; it reports whether anything changed.
func (d *deployment) push(ctx context.Context, p *plan, play string, hosts []string, limit int) (bool, error) {
	return d.pushPart(ctx, p, play, hosts, limit, nil)
}

// pushPart is push with each node's files and work cut down first by part (nil: all of it).
func (d *deployment) pushPart(ctx context.Context, p *plan, play string, hosts []string, limit int, part func(host string, n *apply.Node)) (bool, error) {
	var mu sync.Mutex
	changed := false
	_, err := d.e.play(ctx, Play{Name: play, Hosts: hosts, Policy: transport.Policy{Limit: limit}, Run: func(ctx context.Context, name string) (bool, error) {
		n, err := d.node(p, name)
		if err != nil {
			return false, err
		}
		if part != nil {
			part(name, &n)
		}
		out, err := apply.Push(ctx, d.e.Conn(name), n)
		d.record(name, out)
		mu.Lock()
		changed = changed || out.Changed()
		mu.Unlock()
		return out.Changed(), err
	}})
	return changed, err
}

// startKubelet starts the kubelet on hosts, restarting it where its files changed in this run or since it
// last started; a worker's kubelet.conf is pointed at the endpoint nodes use first.
func (d *deployment) startKubelet(ctx context.Context, p *plan, play string, hosts []string) error {
	_, err := d.kubelets(ctx, p, play, hosts)
	return err
}

// restartPending reports whether a host's kubelet files changed in this run and its kubelet has not been
// restarted for them yet.
func (d *deployment) restartPending(host string) bool {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	return d.rec.restartKubelet[host]
}

// markRestart has a host's kubelet restart at its next start whatever its files (a certificate switched
// under it).
func (d *deployment) markRestart(host string) {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	d.rec.restartKubelet[host] = true
}

// kubelets is startKubelet reporting whether it started or restarted a kubelet (or repointed a worker's).
func (d *deployment) kubelets(ctx context.Context, p *plan, play string, hosts []string) (bool, error) {
	res, err := d.e.play(ctx, Play{Name: play, Hosts: hosts, Run: func(ctx context.Context, name string) (bool, error) {
		out, err := d.kubeletOn(ctx, p, name)
		return out.Changed(), err
	}})
	return anyChanged(res), err
}

// kubeletOn starts a host's kubelet, or restarts it where its files changed, and returns what the kubelet
// script did (Started: when, by the host's clock); a worker's kubelet.conf is pointed at the endpoint nodes
// use first.
func (d *deployment) kubeletOn(ctx context.Context, p *plan, name string) (apply.Outcome, error) {
	h := d.e.Inv.Host(name)
	conn := d.e.Conn(name)
	cp := h.Has(inventory.RoleControlPlane)
	if !cp {
		// A worker's kubelet.conf is the kubelet's own (TLS bootstrap); when the API endpoint nodes use
		// changes (a control plane grown to several, behind the node-local proxy), point it there. Its
		// CA data follows ca.crt (a bundle of the old and new CAs during a CA rotation).
		out, err := apply.Repoint(ctx, conn, kubeadm.KubeletKubeconfig, p.rendered.NodeEndpoint, p.caPEM(), d.o.DryRun)
		if err != nil {
			return apply.Outcome{}, err
		}
		d.record(name, out)
	}
	d.rec.mu.Lock()
	restart := d.rec.restartKubelet[name]
	d.rec.mu.Unlock()
	out, err := apply.Kubelet(ctx, conn, scripts.KubeletParams{Inputs: apply.KubeletInputs(cp, p.kubeletPath), Restart: restart, Dry: d.o.DryRun})
	d.record(name, out)
	if err == nil && !d.o.DryRun {
		d.rec.mu.Lock()
		delete(d.rec.restartKubelet, name) // restarted: once per change, not at every later start
		d.rec.mu.Unlock()
	}
	return out, err
}
