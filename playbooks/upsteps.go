package playbooks

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/addons"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/tasks/wait"
	"github.com/clusterctl/clusterctl/transport"
)

// waitAPI waits for /readyz, reporting the kubelet's and the static Pods' state every 10 s, and on timeout
// says what the node shows. Then admin.conf's group becomes cluster-admin: everything after is done as
// admin.
func (u *upRun) waitAPI(ctx context.Context, p *plan) error {
	superAdmin, err := pki.ReadSecret(filepath.Join(u.e.StateDir, "kubeconfig", "super-admin.conf"))
	if err != nil {
		return err
	}
	c, err := u.e.client(ctx, superAdmin)
	if err != nil {
		return err
	}
	conn := u.e.Conn(p.cp1.Name)
	err = wait.Poll(ctx, wait.Options{Timeout: u.o.APITimeout, Interval: upPoll, Report: func(string) { u.e.say("wait-api", p.cp1.Name, "%s", apply.NodeState(ctx, conn)) }},
		func() (bool, string, error) {
			if err := c.Ready(ctx); err != nil {
				return false, fmt.Sprintf("the API server on %s (last: %v)", p.cp1.Name, err), nil
			}
			return true, "", nil
		})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w\n%s", err, apply.Diagnose(ctx, conn))
	}
	// the cluster exists: commands that operate one work from this state directory from now on
	if err := statedir.MarkBuilt(u.e.StateDir, u.e.Inv.Cluster.Name, time.Now()); err != nil {
		return err
	}
	if _, err = c.Apply(ctx, bootstrap.Objects(false, nil, nil, nil)[0]); err != nil {
		return err
	}
	if err := u.waitAdmin(ctx); err != nil {
		return err
	}
	return u.putScheduler(ctx, p)
}

// waitAdmin waits until the API server's authorizer has the binding of admin.conf's group to cluster-admin
// just applied: it reads bindings from a cache, and a request of admin's sent at once may be forbidden
// (as kubeadm's EnsureAdminClusterRoleBinding, admin asks until it is allowed). A self review needs no
// permission.
func (u *upRun) waitAdmin(ctx context.Context) error {
	if u.o.DryRun {
		return nil
	}
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}}}
	return u.e.pollEvery(ctx, "wait-api", "", u.o.APITimeout, upPoll, func() (bool, string, error) {
		r, err := admin.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, "admin.conf's group to be cluster-admin", err
		}
		return r.Status.Allowed, "admin.conf's group to be cluster-admin", nil
	})
}

// bootstrap creates, through the API, everything joining nodes and the cluster's addons need.
func (u *upRun) bootstrap(ctx context.Context, p *plan) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	objs, err := u.bootstrapObjects(p)
	if err != nil {
		return err
	}
	var applied []apiclient.Applied
	err = wait.Retry(ctx, u.o.APITimeout, "the API server to take the cluster's objects", func() (err error) {
		applied, err = admin.ApplyAll(ctx, objs...)
		return err
	})
	if err != nil {
		return err
	}
	n := 0
	for _, a := range applied {
		if a.Changed {
			n++
		}
	}
	u.e.say("bootstrap", "", "%d objects applied, %d changed", len(applied), n)
	if !u.e.Inv.Cluster.KubeadmJoin {
		// A cluster made before kubeadmJoin was opt-in, or with it on: kubeadm's tokens approve no more.
		err := admin.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, bootstrap.AutoApproveBinding, metav1.DeleteOptions{})
		switch {
		case err == nil:
			u.e.say("bootstrap", "", "deleted kubeadm's %s binding: the controller-manager no longer approves node client certificates for kubeadm's tokens (cluster.kubeadmJoin is off)", bootstrap.AutoApproveBinding)
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	return wait.Retry(ctx, u.o.APITimeout, "the labels of "+p.cp1.NodeName, func() error { return u.label(ctx, admin.Kube, "bootstrap", p.cp1) })
}

// bootstrapObjects are what bootstrap applies (addons.ClusterObjects).
func (d *deployment) bootstrapObjects(p *plan) ([]runtime.Object, error) {
	containerized := false
	for _, f := range p.facts {
		containerized = containerized || f.Virt != ""
	}
	return addons.ClusterObjects(addons.ClusterParams{Cluster: d.e.Inv.Cluster, NodeEndpoint: p.rendered.NodeEndpoint, CAPEM: p.caPEM(),
		KubeletConfig: p.rendered.KubeletConfig, Tokens: d.tokenList(), Images: p.images, Containerized: containerized,
		EtcdServers: p.rendered.EtcdServers, ExternalCA: p.rendered.ExternalCA})
}

// signerWait bounds waitSigner: past it the kubelets start anyway (they only join later).
const signerWait = 45 * time.Second

// waitSigner waits, at most signerWait, until the controller-manager signs kubelets' certificates. On a new
// cluster its signers start seconds after the API server is ready (after its leader election and its
// controllers' credentials); a kubelet started before then runs as system:anonymous until its client
// certificate comes, and its informers back off meanwhile: measured in the lab, such a worker registered
// 6 s after its certificate came and turned Ready 12 s after its pod network was there, instead of at
// once. The sign is a kubelet request approved and not issued yet (the first control-plane node's serving
// request, approved here): it is issued once the signers run. With none (all issued, a running cluster)
// there is nothing to wait for.
func (u *upRun) waitSigner(ctx context.Context) error {
	if u.o.DryRun {
		return nil
	}
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	u.approver.Kube = admin.Kube
	err = wait.Poll(ctx, wait.Options{Timeout: signerWait, Interval: 250 * time.Millisecond}, func() (bool, string, error) {
		list, err := u.approver.Round(ctx)
		if err != nil {
			return false, "", err
		}
		if r := csr.AwaitingSignature(list); r != "" {
			return false, "the controller-manager to sign " + r, nil
		}
		return true, "", nil
	})
	if err != nil && ctx.Err() == nil {
		u.e.say("join", "", "%v; starting the kubelets anyway", err)
		return nil
	}
	return err
}

// controlPlaneJoins are the run's control-plane hosts but the first.
func (u *upRun) controlPlaneJoins(p *plan) []*inventory.Host {
	var out []*inventory.Host
	for _, h := range p.hosts {
		if h.Has(inventory.RoleControlPlane) && h != p.cp1 {
			out = append(out, h)
		}
	}
	return out
}

func (u *upRun) noControlPlaneJoins(p *plan) string {
	if len(u.controlPlaneJoins(p)) == 0 {
		return "no other control-plane host in this run"
	}
	return ""
}

// joinControlPlanes joins the other control-plane nodes one at a time, as kubeadm join --control-plane:
// the node's etcd member is added as a learner through the etcd API before the member starts, the node's
// kubelet starts etcd and the control plane, the learner is promoted once it has caught up, and the node's
// API server must be ready before the next node. Members already there are left alone. A dry run records
// what their kubelets would do.
func (u *upRun) joinControlPlanes(ctx context.Context, p *plan) error {
	if err := u.pushed(ctx); err != nil {
		return err
	}
	joining := u.controlPlaneJoins(p)
	if u.o.DryRun {
		return u.startKubelet(ctx, p, "control-plane-join", names(joining))
	}
	ec, err := u.e.etcd(ctx)
	if err != nil {
		return err
	}
	defer ec.Close()
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	roll := u.cpRoll(p, "control-plane-join", false)
	roll.pushed = true
	// start starts a joining node's control plane, or rolls a running node's to its manifests.
	start := func(h *inventory.Host) error {
		if u.running(p, h) {
			_, err := roll.node(ctx, h)
			return err
		}
		return u.startKubelet(ctx, p, "control-plane-join", []string{h.Name})
	}
	if u.e.Inv.ExternalEtcd() {
		// etcd runs elsewhere: a control-plane node is its API server, controller-manager and scheduler.
		for _, h := range joining {
			if err := start(h); err != nil {
				return err
			}
			if err := u.waitNodeAPI(ctx, h); err != nil {
				return err
			}
			if err := u.label(ctx, admin.Kube, "control-plane-join", h); err != nil {
				return err
			}
		}
		return roll.settle(ctx)
	}
	for _, h := range joining {
		peer := kubeadm.EtcdPeerURL(inventory.AddrText(h.NodeIP(p.nodeIPs[h.Name])))
		m, added, err := ec.AddLearner(ctx, peer)
		if err != nil {
			return fmt.Errorf("%s: adding its etcd member: %w", h.Name, err)
		}
		if added {
			u.e.say("control-plane-join", h.Name, "etcd member %x added as a learner (%s)", m.ID, peer)
		}
		if err := start(h); err != nil {
			return err
		}
		if m.Learner {
			if err := ec.Promote(ctx, m.ID, u.o.APITimeout); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			u.e.say("control-plane-join", h.Name, "etcd member %x promoted to voting member", m.ID)
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
		if err := u.label(ctx, admin.Kube, "control-plane-join", h); err != nil {
			return err
		}
	}
	return roll.settle(ctx)
}

// running says whether h is a control-plane host but the first whose static Pods run already (its API
// server's manifest is there): a re-run of up, or add-node of an etcd host, which every API server is
// pointed at. up's push holds its manifests back (holdRunning), and control-plane-join rolls the running
// nodes one at a time (cpRoll: a changed Pod stopped before its manifest is written, the API server first,
// Ready before the next node), after the first node, whose manifests the push writes: so a change every
// API server takes (--etcd-servers, a certificate) never restarts two at once. The first node stays in the
// push: before bootstrap its admin has no RBAC yet to watch a roll, and a node-local proxy it starts to
// use comes with that push. A dry run holds nothing.
func (u *upRun) running(p *plan, h *inventory.Host) bool {
	if u.o.DryRun || h == p.cp1 || !h.Has(inventory.RoleControlPlane) {
		return false
	}
	f := p.facts[h.Name]
	return f != nil && f.Files[kubeadm.Manifest(kubeadm.APIServer)]
}

// hold is what the push leaves out of a host's files: a running control-plane node's static Pod
// manifests (holdRunning), the new first control-plane node's scheduler's (holdScheduler).
func (u *upRun) hold(p *plan) func(host string, n *apply.Node) {
	return func(host string, n *apply.Node) {
		u.holdRunning(p, host, n)
		u.holdScheduler(p, host, n)
	}
}

// holdRunning cuts the push of a running control-plane node (running) down to its files but its static
// Pod manifests.
func (u *upRun) holdRunning(p *plan, host string, n *apply.Node) {
	if h := u.e.Inv.Host(host); h != nil && u.running(p, h) {
		withoutManifests(host, n)
	}
}

// newCluster says whether the first control-plane node has no API server yet (its manifest is not there):
// up makes the cluster, not a re-run or add-node. A dry run changes nothing, so it holds nothing.
func (u *upRun) newCluster(p *plan) bool {
	f := p.facts[p.cp1.Name]
	return !u.o.DryRun && f != nil && !f.Files[kubeadm.Manifest(kubeadm.APIServer)]
}

// holdScheduler keeps the scheduler's manifest out of a new cluster's first control-plane node's push;
// waitAPI writes it once the API server is ready. A scheduler started beside its API server lists
// nothing until that API server is up, and retries under client-go's back-off: in a lab run its caches
// synced 4.1 s, and it took its lease 5.4 s, after the API server was ready, while the DaemonSets' Pods
// (kube-proxy, flanneld) waited unscheduled. Written after, it lists at once: flannel's network step took
// 3.8-5.5 s in thirteen 1+2 runs, against 5.4-7.8 s in three before. The controller-manager is not held: it
// starts its controllers only once it leads, and retries its lease every 2 s without a back-off.
func (u *upRun) holdScheduler(p *plan, host string, n *apply.Node) {
	if host == p.cp1.Name && u.newCluster(p) {
		sched := kubeadm.Manifest(kubeadm.Scheduler)
		for _, f := range n.Files {
			if f.Path == sched {
				u.heldScheduler = append(u.heldScheduler, f)
			}
		}
		n.Files = slices.DeleteFunc(n.Files, func(f transport.File) bool { return f.Path == sched })
	}
}

// putScheduler writes the scheduler's manifest holdScheduler held.
func (u *upRun) putScheduler(ctx context.Context, p *plan) error {
	if len(u.heldScheduler) == 0 {
		return nil
	}
	out, err := apply.Files(ctx, u.e.Conn(p.cp1.Name), u.heldScheduler, false)
	u.record(p.cp1.Name, out)
	if err != nil {
		return fmt.Errorf("%s: the scheduler's manifest: %w", p.cp1.Name, err)
	}
	u.heldScheduler = nil
	return nil
}

// ready waits for every Node to be Ready with its serving certificate approved, deletes the token and
// reports the nodes.
func (u *upRun) ready(ctx context.Context, p *plan) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	if err := u.servingFromServingCA(ctx, p); err != nil {
		return err
	}
	if !p.net.Ready() && len(u.e.Inv.Cluster.NetworkAddons()) == 0 {
		u.e.say("ready", "", "not waiting for Ready nodes: no pod network")
		// The joining kubelets are done with the token (and their bootstrap kubeconfig) once registered.
		err := u.waitNodes(ctx, p, "ready", func(byName map[string]*corev1.Node) (bool, string) {
			var missing []string
			for _, h := range p.nodes() {
				if byName[h.NodeName] == nil {
					missing = append(missing, h.NodeName+" (not registered)")
				}
			}
			return len(missing) == 0, "nodes: " + strings.Join(missing, ", ")
		})
		if err != nil {
			return err
		}
	} else {
		serving := map[string]bool{}
		err := u.waitNodes(ctx, p, "ready", func(byName map[string]*corev1.Node) (bool, string) {
			var waiting []string
			for _, h := range p.nodes() {
				n := byName[h.NodeName]
				switch {
				case n == nil || !nodes.Ready(n):
					waiting = append(waiting, h.NodeName+" (not Ready)")
				case !nodes.ReadySince(n, u.started(h.Name)):
					// Its kubelet restarted in this run: the Ready seen is its predecessor's until it reports.
					waiting = append(waiting, h.NodeName+" (its restarted kubelet has not reported yet)")
				case !u.approver.Approved(h.NodeName):
					waiting = append(waiting, h.NodeName+" (no serving certificate)")
				case !serving[h.NodeName]:
					// An approved request may be one a kubelet restarted since made: the kubelet running
					// now serves with a certificate only once its own request is approved.
					if serving[h.NodeName] = kubeletServes(ctx, admin, h.NodeName); !serving[h.NodeName] {
						waiting = append(waiting, h.NodeName+" (its kubelet does not answer the API server on port 10250 yet: no serving certificate, or the port unreachable)")
					}
				}
			}
			return len(waiting) == 0, "nodes: " + strings.Join(waiting, ", ")
		})
		u.res.Unapproved = u.approver.Unapproved()
		if err != nil {
			return err
		}
		err = u.e.pollEvery(ctx, "ready", "", u.o.NodeTimeout, upPoll, func() (bool, string, error) {
			waiting, err := nodes.AddonsWaiting(ctx, admin.Kube)
			return len(waiting) == 0, strings.Join(waiting, ", "), err
		})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (kubectl -n kube-system get pods shows why)", err)
		}
		if err != nil {
			return err
		}
	}
	if err := u.dropBootstrapKubeconfigs(ctx, p); err != nil {
		return err
	}
	// Every token has done its job (those of Nodes registered earlier are gone already).
	err = wait.Retry(ctx, u.o.NodeTimeout, "the bootstrap tokens to be deleted", func() error {
		return u.retireTokens(ctx, admin, func(string) bool { return true })
	})
	if err != nil {
		return err
	}
	return wait.Retry(ctx, u.o.NodeTimeout, "the Nodes' status", func() (err error) {
		u.res.Nodes, err = nodeStatuses(ctx, admin)
		return err
	})
}

// dropBootstrapKubeconfigs removes bootstrap-kubelet.conf from the workers, as kubeadm's join does, once
// their kubelets are done with it (ready has seen their Nodes registered, with the client certificate the
// token got them). A file an interrupted run left beside a kubelet.conf goes too.
func (u *upRun) dropBootstrapKubeconfigs(ctx context.Context, p *plan) error {
	var hosts []string
	for _, h := range p.workers() {
		if f := p.facts[h.Name]; p.joining[h.Name] || f != nil && f.Files[kubeadm.BootstrapKubeconfig] {
			hosts = append(hosts, h.Name)
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	_, err := u.e.play(ctx, Play{Name: "ready", Hosts: hosts, Run: func(ctx context.Context, name string) (bool, error) {
		return apply.RemoveFiles(ctx, u.e.Conn(name), kubeadm.BootstrapKubeconfig)
	}})
	return err
}

// kubeletServes reports whether a node's kubelet answers on its TLS port (through the API server's node
// proxy, as kubectl logs and exec reach it): it does only with a serving certificate.
func kubeletServes(ctx context.Context, admin *apiclient.Client, node string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := admin.Kube.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("healthz").DoRaw(ctx)
	return err == nil
}
