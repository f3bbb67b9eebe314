package playbooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/transport"
)

// PreflightOptions tune the preflight playbook.
type PreflightOptions struct {
	// Ignore names checks whose errors do not fail the run ("all" for every one).
	Ignore []string
	// MaxClockSkew is the clock difference to the workstation above which a host fails (default 5s).
	MaxClockSkew time.Duration
	// Members are the membership marks of this cluster (see MemberMark): one, or two while a CA rotation
	// replaces the CA. On a host that carries one, the files and ports clusterctl itself made are expected,
	// not errors: that is a re-run, or the resume of an interrupted one.
	Members []string
	// Hosts are the hosts checked (the session's when nil).
	Hosts []*inventory.Host
}

// PreflightReport is what preflight found, grouped by host in inventory order.
type PreflightReport struct {
	Hosts    []PreflightHost `json:"hosts"`
	Errors   int             `json:"errors"`
	Warnings int             `json:"warnings"`
	Ignored  int             `json:"ignored"`
}

// PreflightHost is one host's part of the report.
type PreflightHost struct {
	Name     string              `json:"name"`
	Set      preflight.CheckSet  `json:"set"`
	Facts    *facts.Facts        `json:"-"`
	Findings []preflight.Finding `json:"findings"`
}

// Failed reports whether an error is left that was not ignored.
func (r *PreflightReport) Failed() bool { return r.Errors > 0 }

// Preflight connects to every host, gathers facts in one round trip each, runs kubeadm's checks for each
// host's role, then the checks across hosts: duplicate identities, clock skew, and whether every node reaches
// the API server's port and control-plane hosts each other's etcd ports (through short-lived listeners).
// Plays:
//
//	connect     all hosts at once (up to --forks), unreachable hosts reported, the rest go on
//	facts       one command per host
//	checks      per host, on the workstation
//	reach-api   every node connects to the first control-plane host's API port
//	reach-etcd  control-plane hosts connect to each other's etcd ports
func Preflight(ctx context.Context, e *Env, opts PreflightOptions) (*PreflightReport, error) {
	if opts.MaxClockSkew == 0 {
		opts.MaxClockSkew = 5 * time.Second
	}
	if opts.Hosts == nil {
		opts.Hosts = e.Hosts
	}
	p := newPreflightRun(e, opts)
	reachable, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.gather(ctx, reachable); err != nil {
		return nil, err
	}
	p.check()
	if err := reachability(ctx, e, opts.Hosts, p.byHost, p.add); err != nil {
		return nil, err
	}
	p.tally()
	return p.report, nil
}

// preflightRun is one run of Preflight: the report, by host, filled by concurrent plays.
type preflightRun struct {
	e      *Env
	opts   PreflightOptions
	report *PreflightReport
	byHost map[string]*PreflightHost
	mu     sync.Mutex
}

// newPreflightRun gives each host its kubeadm check set: init for the first control-plane host,
// control-plane-join for the others, join for workers.
func newPreflightRun(e *Env, opts PreflightOptions) *preflightRun {
	p := &preflightRun{e: e, opts: opts, report: &PreflightReport{}, byHost: map[string]*PreflightHost{}}
	cp := e.Inv.ControlPlanes()
	for _, h := range opts.Hosts {
		set := preflight.SetJoin
		if !h.IsNode() {
			set = preflight.SetEtcd
		}
		if h.Has(inventory.RoleControlPlane) {
			set = preflight.SetControlPlaneJoin
			if len(cp) > 0 && cp[0].Name == h.Name {
				set = preflight.SetInit
			}
		}
		p.report.Hosts = append(p.report.Hosts, PreflightHost{Name: h.Name, Set: set})
	}
	for i := range p.report.Hosts {
		p.byHost[p.report.Hosts[i].Name] = &p.report.Hosts[i]
	}
	return p
}

func (p *preflightRun) add(fs ...preflight.Finding) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range fs {
		if h, ok := p.byHost[f.Host]; ok {
			h.Findings = append(h.Findings, f)
		}
	}
}

// connect connects to every host; an unreachable one is a finding, and the others go on.
func (p *preflightRun) connect(ctx context.Context) ([]string, error) {
	results, err := Connect(ctx, p.e, p.opts.Hosts, 1)
	if err != nil {
		return nil, err
	}
	var reachable []string
	for _, r := range results {
		if r.Err != nil {
			// the report names the host above its findings: the error without it
			p.add(preflight.Finding{Host: r.Host, Check: "SSH", Severity: preflight.SevError, Message: strings.TrimPrefix(r.Err.Error(), r.Host+": ")})
			continue
		}
		reachable = append(reachable, r.Host)
	}
	return reachable, nil
}

// gather learns every reachable host's facts, one command each, and keeps them in the session.
func (p *preflightRun) gather(ctx context.Context, reachable []string) error {
	_, err := p.e.play(ctx, Play{Name: "facts", Hosts: reachable, Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
		f, err := p.e.gatherFacts(ctx, name, min(facts.SkewReported, p.opts.MaxClockSkew))
		if err != nil {
			p.add(preflight.Finding{Host: name, Check: "Facts", Severity: preflight.SevError, Message: err.Error()})
			return false, err
		}
		p.mu.Lock()
		p.byHost[name].Facts = f
		p.mu.Unlock()
		return false, nil
	}})
	return err
}

// check runs each host's checks on the workstation, then the checks across hosts.
func (p *preflightRun) check() {
	c := p.e.Inv.Cluster
	apiHost := c.ControlPlaneEndpoint
	if apiHost != "" {
		apiHost, _, _ = strings.Cut(apiHost, ":")
	} else if cp := p.e.Inv.ControlPlanes(); len(cp) > 0 {
		apiHost = cp[0].Address
	}
	var all []*facts.Facts
	for _, h := range p.opts.Hosts {
		ph := p.byHost[h.Name]
		if ph.Facts == nil {
			continue
		}
		all = append(all, ph.Facts)
		p.add(preflight.Run(ph.Facts, &preflight.Node{Set: ph.Set, NodeName: h.NodeName, KubernetesVersion: c.KubernetesVersion,
			APIServerPort: c.APIServer.BindPort, CRISocket: c.ContainerRuntimeEndpoint,
			ServiceSubnet: c.Networking.ServiceSubnet, PodSubnet: c.Networking.PodSubnet, APIHost: apiHost,
			InstallsRuntime: c.InstallsRuntime(), AllowCgroupV1: c.Kubelet.AllowsCgroupV1(),
			NFTablesProxy: c.KubeProxy.Mode == inventory.ProxyNFTables,
			ExternalEtcd:  p.e.Inv.ExternalEtcd(), EtcdMember: h.Has(inventory.RoleEtcd), CIS: c.Security.CIS()})...)
	}
	p.add(preflight.CrossHostChecks(all, p.opts.MaxClockSkew)...)
	// Node addresses: the run's hosts' (learned when the inventory gives none), the others' from the
	// inventory.
	addrs := map[string]string{}
	for i := range p.e.Inv.Hosts {
		h := &p.e.Inv.Hosts[i]
		var learned inventory.NodeAddrs
		if ph := p.byHost[h.Name]; ph != nil && ph.Facts != nil {
			learned = ph.Facts.NodeIPs()
		}
		if ip := h.NodeIP(learned); ip.IsValid() {
			addrs[h.Name] = ip.String()
		}
		if ph := p.byHost[h.Name]; ph != nil && ph.Facts != nil {
			for _, f := range h.MissingFamilies(learned) {
				p.add(preflight.Finding{Host: h.Name, Check: "NodeAddress", Severity: preflight.SevError,
					Message: fmt.Sprintf("the cluster has %s Pods and Services (networking.podSubnet %s) but the host has no %s address: neither its internalAddress nor its interfaces give one; give the host one, or set internalAddress",
						f, p.e.Inv.Cluster.Networking.PodSubnet, f)})
			}
		}
	}
	p.add(preflight.DuplicateNodeAddresses(addrs)...)
	p.add(networkOf(p.e.Inv).Check(p.networkNodes(addrs))...)
}

// networkNodes are the inventory's nodes as the pod network's check sees them: the run's with their facts.
func (p *preflightRun) networkNodes(addrs map[string]string) []network.Node {
	var out []network.Node
	for i := range p.e.Inv.Hosts {
		h := &p.e.Inv.Hosts[i]
		if !h.IsNode() || addrs[h.Name] == "" {
			continue
		}
		n := network.Node{Host: h.Name, Name: h.NodeName, IP: addrs[h.Name]}
		if ph := p.byHost[h.Name]; ph != nil {
			n.InRun, n.Facts = true, ph.Facts
		}
		out = append(out, n)
	}
	return out
}

// tally drops, on this cluster's members, what clusterctl made there itself; applies --ignore; counts.
func (p *preflightRun) tally() {
	r := p.report
	for i := range r.Hosts {
		h := &r.Hosts[i]
		if mark, joined := markOf(p.e.Inv.Cluster.Name, h.Facts); mark != "" && slices.Contains(p.opts.Members, mark) {
			h.Findings = slices.DeleteFunc(h.Findings, ours)
			if joined {
				h.Findings = append(h.Findings, preflight.Finding{Host: h.Name, Check: "Membership", Severity: preflight.SevWarning,
					Message: "joined this cluster without clusterctl (kubeadm join: the cluster's CA, no clusterctl mark): taken over as a node of the cluster; up writes its configuration and marks it, its kubelet keeps its credentials"})
			}
		}
		preflight.Ignore(h.Findings, p.opts.Ignore)
		for _, f := range h.Findings {
			switch {
			case f.Ignored:
				r.Ignored++
			case f.Severity == preflight.SevError:
				r.Errors++
			default:
				r.Warnings++
			}
		}
		if h.Findings == nil {
			h.Findings = []preflight.Finding{}
		}
	}
}

// markOf is a host's membership mark: the one clusterctl wrote there, or for a node that joined without
// clusterctl (joined: kubeadm join; no mark, a kubelet kubeconfig), the mark of the CA certificate it trusts.
func markOf(cluster string, f *facts.Facts) (mark string, joined bool) {
	switch {
	case f == nil:
		return "", false
	case f.Member != "":
		return f.Member, false
	case f.CACert == "" || !f.Files[kubeadm.KubeletKubeconfig]:
		return "", false
	}
	ca, err := pki.ParseCert([]byte(f.CACert))
	if err != nil || !ca.IsCA {
		return "", false
	}
	return MemberMark(cluster, pki.CAHash(ca)), true
}

// MemberMark is the mark of the cluster named name with the given CA hash.
func MemberMark(name, caHash string) string { return "cluster=" + name + " ca=" + caHash }

// ours reports whether a finding is about what clusterctl puts on a member host: its files, directories, the
// ports of the components it runs, and a runtime it may be restarting (an interrupted run restarts
// containerd; the push waits for it).
func ours(f preflight.Finding) bool {
	return f.Severity == preflight.SevError && (strings.HasPrefix(f.Check, "Port-") || strings.HasPrefix(f.Check, "FileAvailable--") ||
		strings.HasPrefix(f.Check, "DirAvailable--") || f.Check == "CRI")
}

// reachability checks that every node reaches the first control-plane host's API port, and that etcd
// members reach each other's peer port and members and API servers their client port (the etcd hosts, or
// the control-plane hosts when etcd is stacked). Where nothing listens yet, a short-lived listener is
// started on the target for the probes and stopped afterwards. A host whose facts show an established
// connection to the target's address and port is not probed: on a running cluster, a re-run then probes
// nothing its kubelets and members already connect to.
func reachability(ctx context.Context, e *Env, hosts []*inventory.Host, byHost map[string]*PreflightHost, add func(...preflight.Finding)) error {
	ready := func(name string) bool { h, ok := byHost[name]; return ok && h.Facts != nil }
	for _, p := range reachProbes(e.Inv, hosts, ready) {
		target := byHost[p.target]
		ip := nodeIP(e.Inv.Host(p.target), target.Facts)
		if ip == "" {
			add(preflight.Finding{Host: p.target, Check: p.check, Severity: preflight.SevError, Message: "cannot tell the host's node address: set internalAddress in the inventory"})
			continue
		}
		// A host with an established connection to the port (a joined kubelet's to the API server, a
		// member's to its peers) reaches it: no probe, no session.
		p.from = slices.DeleteFunc(p.from, func(name string) bool {
			h := byHost[name]
			return h != nil && h.Facts != nil && h.Facts.ConnectedTo(ip, p.port)
		})
		if len(p.from) == 0 {
			continue
		}
		if err := p.run(ctx, e, ip, target.Facts.ListensOn(p.port), add); err != nil {
			return err
		}
	}
	return nil
}

// reachProbe is a port of a host (target) that other hosts (from) must reach.
type reachProbe struct {
	check  string
	target string
	port   int
	from   []string
}

// reachProbes are the ports the hosts ready to be probed (with facts) must reach: the first control-plane
// node's API server from every other node, each etcd member's peer port from the other members and its
// client port from them and the API servers.
func reachProbes(inv *inventory.Inventory, hosts []*inventory.Host, ready func(string) bool) []reachProbe {
	var probes []reachProbe
	cps := inv.ControlPlanes()
	if len(cps) > 0 && ready(cps[0].Name) {
		var from []string
		for _, h := range hosts {
			if h.Name != cps[0].Name && h.IsNode() && ready(h.Name) {
				from = append(from, h.Name)
			}
		}
		if len(from) > 0 {
			probes = append(probes, reachProbe{"APIServerReachable", cps[0].Name, inv.Cluster.APIServer.BindPort, from})
		}
	}
	members := inv.EtcdHosts()
	for _, t := range members {
		var peers, clients []string
		for _, o := range members {
			if o.Name != t.Name && ready(o.Name) {
				peers = append(peers, o.Name)
			}
		}
		clients = slices.Clone(peers)
		for _, o := range cps {
			if o.Name != t.Name && ready(o.Name) && !slices.Contains(clients, o.Name) {
				clients = append(clients, o.Name)
			}
		}
		if ready(t.Name) && len(clients) > 0 {
			probes = append(probes, reachProbe{"EtcdReachable", t.Name, kubeadm.PortEtcdClient, clients})
		}
		if ready(t.Name) && len(peers) > 0 {
			probes = append(probes, reachProbe{"EtcdReachable", t.Name, kubeadm.PortEtcdPeer, peers})
		}
	}
	return probes
}

// run probes the target's port at ip from each host, with a listener of ours on it when nothing listens
// there (listening: the facts say something does).
func (p reachProbe) run(ctx context.Context, e *Env, ip string, listening bool, add func(...preflight.Finding)) error {
	if !listening {
		stop, err := preflight.Listen(ctx, e.Conn(p.target), ip, p.port)
		if err != nil {
			add(preflight.Finding{Host: p.target, Check: p.check, Severity: preflight.SevWarning,
				Message: fmt.Sprintf("could not test reachability of port %d: %v", p.port, err)})
			return nil
		}
		defer stop()
	}
	play := fmt.Sprintf("reach %s:%d", p.target, p.port)
	probeFrom := func(hosts []string, final bool) ([]string, error) {
		var mu sync.Mutex
		var failed []string
		_, err := e.play(ctx, Play{Name: play, Hosts: hosts, Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
			err := preflight.Probe(ctx, e.Conn(name), ip, p.port)
			if err != nil {
				mu.Lock()
				failed = append(failed, name)
				mu.Unlock()
				if final {
					add(preflight.Finding{Host: name, Check: p.check, Severity: preflight.SevError,
						Message: fmt.Sprintf("cannot reach %s at %s:%d: check firewalls and routes between the hosts", p.target, ip, p.port)})
					return false, err
				}
			}
			return false, nil
		}})
		return failed, err
	}
	failed, err := probeFrom(p.from, false)
	if err != nil || len(failed) == 0 {
		return err
	}
	// What listened when the facts were read may have stopped since (an API server the kubelet is
	// restarting, as when an interrupted rotation is resumed): listen there now if the port is free, and
	// probe once more. The check is about the network between the hosts, not the service.
	if stop, err := preflight.Listen(ctx, e.Conn(p.target), ip, p.port); err == nil {
		defer stop()
	}
	_, err = probeFrom(failed, true)
	return err
}
