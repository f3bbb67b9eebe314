// Package playbooks sequences clusterctl's work: each playbook is a list of steps (runSteps), a step runs
// plays (which hosts, how many at once, what failure they tolerate) of the tasks that do the work. The
// session (Env) holds what the playbooks share: the inventory, connections, facts, the API client.
//
// Its files are layered, and no two refer to each other (test/xrefs counts the references, and its test
// fails on a pair that goes both ways):
//
//   - runner.go (steps and their runner), env.go (the session), hooks.go;
//   - deployment.go: the deployment (what a run renders and pushes, and its results), whose work is in
//     deploy.go, deployartifacts.go, deployetcd.go, tokens.go and roll.go;
//   - a run's own state beside the files of its steps: uprun.go (up's options, result and run, used by
//     upsteps.go and upnetwork.go), upgraderun.go (upgrade's, used by upgradecheck.go and
//     upgradestate.go);
//   - the playbooks, which sequence the steps: up.go, upgrade.go, carotate.go, rotate.go, removenode.go,
//     reset.go, etcd.go, etcdrestore.go, preflight.go, certs.go.
//
// A declaration two files need goes down to the lowest layer that both use.
package playbooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/tasks/wait"
	"github.com/clusterctl/clusterctl/transport"
)

// EnvConfig is what a session is made of.
type EnvConfig struct {
	Inv *inventory.Inventory
	// Hosts are the hosts acted on (--limit), in inventory order. Playbooks read it, never change it.
	Hosts  []*inventory.Host
	Dialer *transport.Dialer
	Forks  int
	Sink   transport.Sink
	Log    *slog.Logger
	// StateDir holds the cluster's PKI, kubeconfigs, known_hosts and resume points.
	StateDir string
}

// Env is one session: the configuration, and what is made from it on first use and shared by the
// playbooks of the session (connections, facts, the admin API client). A playbook's own state is its own.
type Env struct {
	EnvConfig

	mu        sync.Mutex
	conns     map[string]*transport.Conn
	facts     map[string]*facts.Facts
	admin     *apiclient.Client
	adminConf []byte
	// lockHeld, set while a run takes the cluster's lock beside its first steps (LockOptions.Beside), waits
	// until it holds it (changes: before a step that changes something; else at the end of a run that
	// changed nothing); nil when there is nothing to wait for.
	lockHeld func(changes bool) error
	// dialing are the hosts being connected to, each by one caller (dial): another waits for it.
	dialing map[string]*dialCall
}

// dialCall is a connection under way: done is closed when it is made (in conns) or failed (err).
type dialCall struct {
	done chan struct{}
	err  error
}

// held waits until the run holds the cluster's lock, when it is being taken beside the run (lockHeld).
func (e *Env) held(changes bool) error {
	e.mu.Lock()
	wait := e.lockHeld
	e.mu.Unlock()
	if wait == nil {
		return nil
	}
	return wait(changes)
}

// NewEnv makes a session; nothing is connected yet.
func NewEnv(c EnvConfig) *Env { return &Env{EnvConfig: c} }

// Conn returns the open connection to a host, or nil.
func (e *Env) Conn(name string) *transport.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conns[name]
}

// Disconnect closes the connection to one host, if open, for a command done with it (exec holds at most
// --forks connections that way, not one per host).
func (e *Env) Disconnect(name string) {
	e.mu.Lock()
	c := e.conns[name]
	delete(e.conns, name)
	e.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// forget drops a host's connection (the host rebooted) and the admin client, which may dial through it:
// the next use connects again.
func (e *Env) forget(name string) {
	e.mu.Lock()
	c := e.conns[name]
	delete(e.conns, name)
	e.admin, e.adminConf = nil, nil
	e.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// adopt keeps a connection made outside Connect (a wait for a host coming back) as the host's.
func (e *Env) adopt(name string, c *transport.Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conns == nil {
		e.conns = map[string]*transport.Conn{}
	}
	if old := e.conns[name]; old != nil {
		old.Close()
	}
	e.conns[name] = c
}

// Close closes every connection.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		c.Close()
	}
	e.conns = nil
}

// TargetFor is how to reach an inventory host. User and port left at their defaults in the inventory are
// left empty, so that ~/.ssh/config can supply them (root and 22 otherwise).
func TargetFor(inv *inventory.Inventory, h *inventory.Host) transport.Target {
	t := transport.Target{
		Name:          h.Name,
		Address:       h.Address,
		Port:          inv.ExplicitPort(h),
		User:          inv.ExplicitUser(h),
		IdentityFiles: h.SSH.IdentityFiles,
		HostKeys:      h.SSH.HostKey,
		Become:        h.SSH.Become,
	}
	if len(t.IdentityFiles) == 0 {
		t.IdentityFiles = inv.SSH.IdentityFiles
	}
	if t.Become == nil {
		t.Become = inv.SSH.Become
	}
	bastions := h.SSH.Bastions
	if len(bastions) == 0 {
		bastions = inv.SSH.Bastions
	}
	for _, b := range bastions {
		hop := transport.Hop{Address: b.Address, Port: b.Port, User: b.User, IdentityFiles: b.IdentityFiles, HostKeys: b.HostKey}
		if hop.User == "" {
			hop.User = inv.ExplicitUser(h)
		}
		if len(hop.IdentityFiles) == 0 {
			hop.IdentityFiles = t.IdentityFiles
		}
		t.Bastions = append(t.Bastions, hop)
	}
	return t
}

// Connect opens a connection to each host not connected yet, at most Forks at once. maxFail is the fraction
// of hosts that may be unreachable before the play fails.
func Connect(ctx context.Context, e *Env, hosts []*inventory.Host, maxFail float64) ([]transport.HostResult, error) {
	e.mu.Lock()
	if e.conns == nil {
		e.conns = map[string]*transport.Conn{}
	}
	e.mu.Unlock()
	byName := map[string]*inventory.Host{}
	connected := 0
	for _, h := range hosts {
		byName[h.Name] = h
		if e.Conn(h.Name) != nil {
			connected++
		}
	}
	if connected == len(hosts) && len(hosts) > 0 {
		// Nothing to connect: no play announced (a client of a host already reached asks again).
		out := make([]transport.HostResult, 0, len(hosts))
		for _, h := range hosts {
			out = append(out, transport.HostResult{Host: h.Name, Status: transport.StatusOK})
		}
		return out, nil
	}
	return e.play(ctx, Play{Name: "connect", Hosts: names(hosts), Policy: transport.Policy{MaxFail: maxFail}, Run: func(ctx context.Context, name string) (bool, error) {
		return false, e.dial(ctx, byName[name])
	}})
}

// dial connects to a host not connected yet; a caller that finds it being connected (the lock's Lease
// taken beside preflight's connections) waits for that connection instead of making another.
func (e *Env) dial(ctx context.Context, h *inventory.Host) error {
	e.mu.Lock()
	if e.conns[h.Name] != nil {
		e.mu.Unlock()
		return nil
	}
	if call := e.dialing[h.Name]; call != nil {
		e.mu.Unlock()
		select {
		case <-call.done:
			return call.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	call := &dialCall{done: make(chan struct{})}
	if e.dialing == nil {
		e.dialing = map[string]*dialCall{}
	}
	e.dialing[h.Name] = call
	e.mu.Unlock()
	c, err := e.Dialer.Dial(ctx, TargetFor(e.Inv, h))
	e.mu.Lock()
	if err == nil {
		if e.conns == nil {
			e.conns = map[string]*transport.Conn{}
		}
		e.conns[h.Name] = c
	}
	delete(e.dialing, h.Name)
	call.err = err
	e.mu.Unlock()
	close(call.done)
	return err
}

// Play is work on hosts: which, how many at once and what failure it tolerates, and what runs on each.
type Play struct {
	Name  string
	Hosts []string
	// Policy: Limit 0 is the session's forks; MaxFail is the fraction of hosts that may fail before the
	// play stops starting new ones (0: none, control-plane and most plays; 1: every host tried and each
	// failure reported, as preflight, reset and certificate checks do).
	Policy transport.Policy
	// Run does the work on one host and reports whether it changed anything.
	Run func(ctx context.Context, host string) (changed bool, err error)
	// Quiet plays emit no events (a check repeated by a wait).
	Quiet bool
}

// play runs a play, its events to the session's sink.
func (e *Env) play(ctx context.Context, p Play) ([]transport.HostResult, error) {
	if p.Policy.Limit == 0 {
		p.Policy.Limit = e.Forks
	}
	sink := e.Sink
	if p.Quiet {
		sink = nil
	}
	return transport.Fanout(ctx, p.Name, p.Hosts, p.Policy, sink, p.Run)
}

func (e *Env) say(play, host, format string, args ...any) { say(e.Sink, play, host, format, args...) }

// poll waits for check (every second), saying every 10 s what it waits for.
func (e *Env) poll(ctx context.Context, play, host string, timeout time.Duration, check wait.Check) error {
	return e.pollEvery(ctx, play, host, timeout, time.Second, check)
}

// upPoll is how often up checks what it waits for on a new cluster (the API server's readiness, Nodes,
// add-ons): each is a few API requests, and each check's interval is, on average, half of it lost.
const upPoll = 250 * time.Millisecond

// pollEvery is poll with its own interval between checks.
func (e *Env) pollEvery(ctx context.Context, play, host string, timeout, interval time.Duration, check wait.Check) error {
	return wait.Poll(ctx, wait.Options{Timeout: timeout, Interval: interval, Report: func(w string) { e.say(play, host, "waiting for %s", w) }}, check)
}

// setFacts keeps a host's facts for the session (preflight gathers them for every host at once).
func (e *Env) setFacts(name string, f *facts.Facts) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.facts == nil {
		e.facts = map[string]*facts.Facts{}
	}
	e.facts[name] = f
}

// Facts are a host's facts, gathered on first use (connecting to it if need be).
func (e *Env) Facts(ctx context.Context, h *inventory.Host) (*facts.Facts, error) {
	e.mu.Lock()
	f := e.facts[h.Name]
	e.mu.Unlock()
	if f != nil {
		return f, nil
	}
	if _, err := Connect(ctx, e, []*inventory.Host{h}, 0); err != nil {
		return nil, err
	}
	return e.gatherFacts(ctx, h.Name, facts.SkewReported)
}

// gatherFacts asks a connected host its facts (one command) and keeps them in the session; skew is the
// smallest clock skew the caller reports (facts.GatherFacts reads a slow host's clock again only when it
// cannot tell otherwise).
func (e *Env) gatherFacts(ctx context.Context, name string, skew time.Duration) (*facts.Facts, error) {
	c := &e.Inv.Cluster
	// The established connections to the ports preflight probes: what a host reaches already is not probed.
	ask := preflight.Asks().With(facts.Ask{Connections: []int{c.APIServer.BindPort, kubeadm.PortEtcdClient, kubeadm.PortEtcdPeer}})
	f, err := facts.GatherFacts(ctx, e.Conn(name), c.ContainerRuntimeEndpoint, !c.InstallsRuntime(), ask, skew)
	if err != nil {
		return nil, err
	}
	e.setFacts(name, f)
	return f, nil
}

// NodeIP is a host's address in the cluster: the inventory's internal address, else the one its facts show
// (see facts.Facts.NodeIPs), gathered on first use.
func (e *Env) NodeIP(ctx context.Context, h *inventory.Host) (netip.Addr, error) {
	if ip := h.NodeIP(nil); ip.IsValid() {
		return ip, nil
	}
	f, err := e.Facts(ctx, h)
	if err != nil {
		return netip.Addr{}, err
	}
	if ip := h.NodeIP(f.NodeIPs()); ip.IsValid() {
		return ip, nil
	}
	return netip.Addr{}, fmt.Errorf("%s: cannot tell the host's node address: set internalAddress in the inventory", h.Name)
}

// NodeIPs are a host's addresses in the cluster, one of each family the cluster has (the primary's
// first), as NodeIP finds them; an error names the family neither the inventory nor the host gives.
func (e *Env) NodeIPs(ctx context.Context, h *inventory.Host) (inventory.NodeAddrs, error) {
	if len(h.MissingFamilies(nil)) == 0 {
		return h.NodeIPs(nil), nil
	}
	f, err := e.Facts(ctx, h)
	if err != nil {
		return nil, err
	}
	if missing := h.MissingFamilies(f.NodeIPs()); len(missing) > 0 {
		return nil, fmt.Errorf("%s: the host has no %s address the cluster can use: set internalAddress in the inventory", h.Name, missing[0])
	}
	return h.NodeIPs(f.NodeIPs()), nil
}

// firstControlPlane is the inventory's first control-plane host, through which clusterctl reaches the API
// server and etcd.
func (e *Env) firstControlPlane() (*inventory.Host, error) {
	cps := e.Inv.ControlPlanes()
	if len(cps) == 0 {
		return nil, errors.New("the inventory has no control-plane host")
	}
	return cps[0], nil
}

// dialVia dials addresses from a control-plane host, through its SSH connection: the workstation needs no
// route to the cluster's ports.
func (e *Env) dialVia(ctx context.Context, h *inventory.Host, port int) (string, func(context.Context, string, string) (net.Conn, error), error) {
	if _, err := Connect(ctx, e, []*inventory.Host{h}, 0); err != nil {
		return "", nil, err
	}
	ip, err := e.NodeIP(ctx, h)
	if err != nil {
		return "", nil, err
	}
	conn := e.Conn(h.Name)
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), func(ctx context.Context, _, addr string) (net.Conn, error) {
		return conn.DialContext(ctx, "tcp", addr)
	}, nil
}

// client is a client of the first control-plane node's API server with a kubeconfig's credentials.
func (e *Env) client(ctx context.Context, kubeconfig []byte) (*apiclient.Client, error) {
	cp1, err := e.firstControlPlane()
	if err != nil {
		return nil, err
	}
	addr, dial, err := e.dialVia(ctx, cp1, e.Inv.Cluster.APIServer.BindPort)
	if err != nil {
		return nil, err
	}
	return apiclient.New(kubeconfig, func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) })
}

// nodeClient is a client of a control-plane node's own API server, as the cluster's admin.
func (e *Env) nodeClient(ctx context.Context, h *inventory.Host) (*apiclient.Client, error) {
	admin, err := pki.ReadSecret(e.adminKubeconfig())
	if err != nil {
		return nil, err
	}
	addr, dial, err := e.dialVia(ctx, h, e.Inv.Cluster.APIServer.BindPort)
	if err != nil {
		return nil, err
	}
	return apiclient.NewForServer(admin, "https://"+addr, func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) })
}

// Admin is the session's client as the cluster's admin (admin.conf from the state directory), made on
// first use and again whenever admin.conf changed (a rotation renews it).
func (e *Env) Admin(ctx context.Context) (*apiclient.Client, error) {
	admin, err := pki.ReadSecret(e.adminKubeconfig())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	c, same := e.admin, bytes.Equal(e.adminConf, admin)
	e.mu.Unlock()
	if c != nil && same {
		return c, nil
	}
	if c, err = e.client(ctx, admin); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.admin, e.adminConf = c, admin
	e.mu.Unlock()
	return c, nil
}

func (e *Env) adminKubeconfig() string { return filepath.Join(e.StateDir, "admin.conf") }

// etcd reaches the first control-plane node's etcd (with external etcd, the first etcd host's) through its
// SSH connection, with the API server's client certificate as its API server does (an etcd host's own
// health-check client's). The caller closes it.
func (e *Env) etcd(ctx context.Context) (*etcdmember.Client, error) {
	if e.Inv.ExternalEtcd() {
		first := e.Inv.EtcdHosts()[0]
		if _, err := Connect(ctx, e, []*inventory.Host{first}, 0); err != nil {
			return nil, err
		}
		return e.etcdOn(ctx, first)
	}
	cp1, err := e.firstControlPlane()
	if err != nil {
		return nil, err
	}
	return e.etcdOn(ctx, cp1)
}

// etcdExcept is etcd reached through a member other than h's (the first etcd host that is not h): the
// cluster is asked about h's member, or to remove it.
func (e *Env) etcdExcept(ctx context.Context, h *inventory.Host) (*etcdmember.Client, error) {
	if !e.Inv.ExternalEtcd() {
		return e.etcd(ctx)
	}
	for _, m := range e.Inv.EtcdHosts() {
		if m == h {
			continue
		}
		if _, err := Connect(ctx, e, []*inventory.Host{m}, 0); err != nil {
			return nil, err
		}
		return e.etcdOn(ctx, m)
	}
	return nil, fmt.Errorf("%s is the only etcd host of the inventory", h.Name)
}

// EnsureStateDir creates the state directory (0700) or checks an existing one. A directory that others can
// read or enter is refused, as ssh refuses a private key with loose permissions: it holds the cluster's keys;
// so is one another user owns (their CA), or that another user could replace (statedir.CheckPath).
func EnsureStateDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
		if err := statedir.CheckPath(dir); err != nil {
			_ = os.Remove(dir) // made just now, and empty
			return fmt.Errorf("state directory: %w", err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("state directory %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("state directory %s has mode %04o: it holds the cluster's private keys and must not be accessible by others (chmod 700 %s)", dir, st.Mode().Perm(), dir)
	}
	if err := statedir.CheckPath(dir); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

func names(hosts []*inventory.Host) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}

// etcdOn is a client of an etcd host's own member, through that host's SSH connection, with
// its API server's client certificate. The caller closes it.
func (e *Env) etcdOn(ctx context.Context, h *inventory.Host) (*etcdmember.Client, error) {
	pkiDir := filepath.Join(e.StateDir, "pki")
	read := func(p ...string) ([]byte, error) {
		return os.ReadFile(filepath.Join(append([]string{pkiDir}, p...)...))
	}
	ca, err := read("etcd", "ca.crt")
	if err != nil {
		return nil, err
	}
	// A control-plane host's API server client certificate; an etcd host's own health-check client's.
	client := "apiserver-etcd-client"
	if !h.Has(inventory.RoleControlPlane) {
		client = filepath.Join("etcd", "healthcheck-client")
	}
	cert, err := read("nodes", h.NodeName, client+".crt")
	if err != nil {
		return nil, err
	}
	key, err := read("nodes", h.NodeName, client+".key")
	if err != nil {
		return nil, err
	}
	addr, dial, err := e.dialVia(ctx, h, kubeadm.PortEtcdClient)
	if err != nil {
		return nil, err
	}
	return etcdmember.New("https://"+addr, ca, cert, key, func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) })
}

// nodeIP is a host's address in the cluster with its facts (inventory.Host.NodeIP), as text ("" unknown).
func nodeIP(h *inventory.Host, f *facts.Facts) string {
	return inventory.AddrText(h.NodeIP(f.NodeIPs()))
}
