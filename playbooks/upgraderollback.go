package playbooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/transport"
)

// ErrRolledBack is wrapped by the error of an upgrade that failed on a node and put it back.
var ErrRolledBack = errors.New("upgrade rolled back")

// The phases whose writes are kept on each node for a rollback (apply.RollbackDir): a control-plane
// node's static Pods, certificates and kubeconfigs; a node's kubelet, its configuration and runtime.
const (
	phaseControlPlane = "control-plane"
	phaseKubelet      = "kubelet"
)

func (u *upgradeRun) keptDir(phase string) string { return apply.RollbackDir(u.res.To, phase) }

// rollBack puts back, after cause (a control-plane node whose new static Pods did not become healthy),
// every control-plane node the upgrade changed, the last changed first (rollBackControlPlane), so that the
// cluster serves at the version it started from on every node; the kept files are then forgotten and the
// journal removed. A run killed meanwhile leaves the journal saying so: upgrade --rollback finishes it.
func (u *upgradeRun) rollBack(ctx context.Context, p *plan, failing *inventory.Host, cause error) error {
	if err := u.st.Update(func(j *statedir.Journal[upgradeData]) { j.Data.RollingBack = true }); err != nil {
		return errors.Join(cause, err)
	}
	if cause != nil {
		u.e.say("rollback", "", "%v: every control-plane node the upgrade changed is put back to %s", cause, u.res.From)
	}
	hosts := slices.Clone(u.controlPlaneHosts(p))
	slices.Reverse(hosts)
	for _, h := range hosts {
		did, err := u.rollBackControlPlane(ctx, p, h)
		if err != nil {
			return fmt.Errorf("%w; putting %s back failed too: %w (clusterctl upgrade --rollback tries again)", orRollback(cause), h.Name, err)
		}
		if !did && failing != nil && h.Name == failing.Name {
			// nothing of it was kept (a node changed by hand, a run of an older clusterctl): the others are
			// not put back either, and the upgrade stays under way
			if err := u.st.Update(func(j *statedir.Journal[upgradeData]) { j.Data.RollingBack = false }); err != nil {
				return errors.Join(cause, err)
			}
			return fmt.Errorf("%w; %s kept nothing to put back: the upgrade stays under way (find out why on %s; the same command goes on, upgrade --rollback puts back the nodes rolled before it)",
				cause, h.Name, h.Name)
		}
		if did {
			u.res.RolledBack = append(u.res.RolledBack, h.Name)
		}
	}
	if err := u.forgetKept(ctx, names(p.hosts)); err != nil {
		return fmt.Errorf("%w; forgetting the files kept for it: %w", orRollback(cause), err)
	}
	if err := u.st.Remove(); err != nil {
		return err
	}
	back := "no node had changed"
	if len(u.res.RolledBack) > 0 {
		back = strings.Join(u.res.RolledBack, ", ") + " put back"
	}
	if cause == nil {
		u.e.say("rollback", "", "%s: the cluster serves at %s on every node", back, u.res.From)
		return nil
	}
	return fmt.Errorf("%w: %w; %s: the cluster serves at %s on every node (the etcd snapshot taken before is kept)", ErrRolledBack, cause, back, u.res.From)
}

func orRollback(cause error) error {
	if cause == nil {
		return errors.New("the rollback of the upgrade")
	}
	return cause
}

// rollBackControlPlane puts back what the upgrade replaced on a control-plane node, in the order a roll
// changes it: every file but the static Pod manifests (certificates, kubeconfigs), the kubelet restarted
// when its files changed; then etcd's old manifest with the node's API server stopped (when etcd's was
// replaced), then the other old manifests, each running Pod stopped first; and it waits until the node's
// API server answers and the static Pods put back run their old manifests and are Ready. It reports
// whether anything was kept to put back.
func (u *upgradeRun) rollBackControlPlane(ctx context.Context, p *plan, h *inventory.Host) (bool, error) {
	conn := u.e.Conn(h.Name)
	dir := u.keptDir(phaseControlPlane)
	old, err := apply.KeptManifests(ctx, conn, dir, u.staticPods())
	if err != nil {
		return false, err
	}
	if was := images.For(u.e.Inv.Cluster.ImageRepository, u.res.From).Etcd; minorOf(was) != minorOf(p.images.Etcd) {
		// etcd does not go back a minor release once its cluster version may have moved (a member alone
		// moves it at once): it stays at the target's, which serves the old API server as well
		old = slices.DeleteFunc(old, func(f transport.File) bool { return f.Path == kubeadm.Manifest(kubeadm.Etcd) })
		u.e.say("rollback", h.Name, "etcd stays at %s (from %s: etcd does not go back a minor release)", p.images.Etcd, was)
	}
	n, err := u.node(p, h.Name)
	if err != nil {
		return false, err
	}
	out, err := apply.Rollback(ctx, conn, scripts.RollbackParams{Dir: dir, Except: kubeadm.ManifestsDir, Runtime: n.Runtime})
	u.record(h.Name, out)
	if err != nil {
		return true, err
	}
	if len(out.Files) == 0 && len(old) == 0 {
		return false, nil // nothing of its control plane changed (old images imported again at most)
	}
	u.e.say("rollback", h.Name, "putting back its control plane at %s (%d files, %d static Pods)", u.res.From, len(out.Files), len(old))
	kubelet, err := apply.Kubelet(ctx, conn, scripts.KubeletParams{Inputs: apply.KubeletInputs(true, p.kubeletPath)})
	u.record(h.Name, kubelet)
	if err != nil {
		return true, err
	}
	if kubelet.Changed() {
		u.waitKubeletPods(ctx, "rollback", h)
	}
	etcd, _, err := apply.RestartEtcdAlone(ctx, conn, old, u.o.Timeout, func(f string, a ...any) { u.e.say("rollback", h.Name, f, a...) })
	u.record(h.Name, etcd)
	if err != nil {
		return true, err
	}
	manifests, err := apply.Manifests(ctx, conn, old, false, u.o.Timeout)
	u.record(h.Name, manifests)
	if err != nil {
		return true, err
	}
	if err := u.waitNodeAPI(ctx, h); err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w\n%s", err, apply.Diagnose(ctx, conn)) // the kubelet's last words, the containers
		}
		return true, err
	}
	var components []string
	want := staticPodsOf(old)
	for c := range want {
		components = append(components, c)
	}
	slices.Sort(components)
	if err := u.waitStaticPodsOf(ctx, "rollback", h, want, components); err != nil {
		return true, err
	}
	u.e.say("rollback", h.Name, "its control plane runs %s again", u.res.From)
	return true, nil
}

// minorOf is "3.6" of "3.6.8".
func minorOf(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// rollBackKubelets puts back the kubelet of each node of failed (whose kubelet did not come back at the
// target) and waits until its Node is Ready at the version upgraded from; the node stays cordoned.
func (u *upgradeRun) rollBackKubelets(ctx context.Context, p *plan, failed []*inventory.Host, cause error) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return errors.Join(cause, err)
	}
	var back []string
	for _, h := range failed {
		conn := u.e.Conn(h.Name)
		n, err := u.node(p, h.Name)
		if err != nil {
			return errors.Join(cause, err)
		}
		out, err := apply.Rollback(ctx, conn, scripts.RollbackParams{Dir: u.keptDir(phaseKubelet), Runtime: n.Runtime})
		u.record(h.Name, out)
		if err == nil {
			u.e.say("rollback", h.Name, "putting back its kubelet at %s (%d files)", u.res.From, len(out.Files))
			out, err = apply.Kubelet(ctx, conn, scripts.KubeletParams{Inputs: apply.KubeletInputs(h.Has(inventory.RoleControlPlane), p.kubeletPath), Restart: true})
			u.record(h.Name, out)
		}
		if err == nil {
			err = u.e.poll(ctx, "rollback", h.Name, u.o.Timeout, func() (bool, string, error) {
				node, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
				if err != nil {
					return false, "its Node (" + firstLine(err.Error()) + ")", nil
				}
				return node.Status.NodeInfo.KubeletVersion == u.res.From && nodes.Ready(node), "its Node Ready at " + u.res.From, nil
			})
		}
		if err != nil {
			return fmt.Errorf("%w; putting %s's kubelet back failed too: %w", cause, h.Name, err)
		}
		if err := u.forgetKept(ctx, []string{h.Name}); err != nil {
			return errors.Join(cause, err)
		}
		u.res.RolledBack = append(u.res.RolledBack, h.Name)
		back = append(back, h.NodeName)
	}
	return fmt.Errorf("%w: %w; %s put back to %s, Ready, and left cordoned: find out why (journalctl -u kubelet on the node), then run the same command again, which upgrades and uncordons %s, or kubectl uncordon %s to keep %s",
		ErrRolledBack, cause, strings.Join(back, ", "), u.res.From, them(back), strings.Join(back, " "), u.res.From)
}

func them(names []string) string {
	if len(names) == 1 {
		return "it"
	}
	return "them"
}

// forgetKept removes the files kept for a rollback on hosts.
func (u *upgradeRun) forgetKept(ctx context.Context, hosts []string) error {
	_, err := u.e.play(ctx, Play{Name: "rollback", Hosts: hosts, Run: func(ctx context.Context, name string) (bool, error) {
		out, err := apply.Rollback(ctx, u.e.Conn(name), scripts.RollbackParams{Dir: apply.RollbackRoot, Drop: true, Dry: u.o.DryRun})
		return out.Changed(), err
	}})
	return err
}

// notBack are the nodes of todo whose kubelet is not Ready at the target (asked once more, after the wait).
func (u *upgradeRun) notBack(ctx context.Context, admin *apiclient.Client, todo []*inventory.Host) []*inventory.Host {
	var out []*inventory.Host
	for _, h := range todo {
		n, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		if err == nil && (n.Status.NodeInfo.KubeletVersion != u.res.To || !nodes.Ready(n)) {
			out = append(out, h)
		}
	}
	return out
}
