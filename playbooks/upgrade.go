package playbooks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/addons"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Upgrade moves a running cluster to the inventory's Kubernetes version the way upstream documents it:
// checks first (one minor version at most, every Node Ready, etcd quorum, no kubelet newer than an API
// server, the artifacts there), then the control-plane nodes one at a time (etcd first when its version
// changes, with the node's API server stopped; then the API server, controller-manager and scheduler,
// each node's API server ready before the next), then the add-ons (kube-proxy, CoreDNS with its Corefile
// migrated, kubeadm-config, kubelet-config), then every kubelet: control-plane nodes one at a time, then
// workers MaxUnavailable at a time, each cordoned, drained, upgraded, Ready at the new version and
// uncordoned. Each step is recorded in the state directory; the same command resumes a killed upgrade.
func Upgrade(ctx context.Context, e *Env, o UpgradeOptions) (*UpgradeResult, error) {
	o.MaxUnavailable = max(o.MaxUnavailable, 1)
	orDefault(&o.Timeout, defaultWait)
	orDefault(&o.DrainTimeout, defaultWait)
	o.Now = clockOr(o.Now)
	to, err := version.ParseSemantic(e.Inv.Cluster.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	limit := len(e.Hosts) < len(e.Inv.Hosts)
	if limit {
		for _, h := range e.Hosts {
			if h.Has(inventory.RoleControlPlane) {
				return nil, fmt.Errorf("%w: --limit names workers only (%s is a control-plane host: control planes are upgraded together, without --limit)", ErrUpgradeRefused, h.Name)
			}
		}
	}
	var renew *render.Renewal
	if o.CertificateRenewal {
		renew = &render.Renewal{IssuedBefore: o.Now().Add(-time.Hour)}
	}
	hosts := clusterHosts(ctx, e)
	if limit {
		hosts = e.Hosts
	}
	d, p, err := newDeployment(e, hosts, deployOptions{Now: o.Now, DryRun: o.DryRun, Timeout: o.Timeout, Renew: renew})
	if err != nil {
		return nil, err
	}
	u := &upgradeRun{deployment: d, o: o, res: &UpgradeResult{To: to.String(), Order: []string{}, Renewed: []string{},
		ControlPlanes: []PhaseTiming{}, Kubelets: []PhaseTiming{}}, limit: limit, to: to, wasCurrent: map[string]bool{}}
	u.res.To = "v" + to.String()
	if err := u.loadState(); err != nil {
		return nil, err
	}
	defer func() {
		if o.DryRun {
			u.res.Plan = u.hostPlans(p)
		}
	}()
	steps := u.steps()
	if o.Rollback {
		steps = u.rollbackSteps()
	}
	u.res.Phases, err = runSteps(ctx, runOptions{Sink: e.Sink, DryRun: o.DryRun, Progress: u.st}, p, steps)
	return u.res, err
}

// steps are an upgrade's. Its journal (loadState) is the runner's progress: the control-plane, addons and
// kubelets steps resume host by host (Step.Resume); the others read what a killed run left (resume,
// check's hosts under way) or find it from the cluster (versions, files).
func (u *upgradeRun) steps() []Step {
	return []Step{
		// connect, gather facts, preflight checks for the target version
		{Name: "preflight", Plan: func(ctx context.Context, p *plan) (*plan, error) {
			report, p, err := u.preflight(ctx, p, u.o.Preflight)
			u.res.Preflight = report
			return p, err
		}, Dry: true},
		// the target's files made locally (certificates renewed), its artifacts verified (pulled into the
		// cache when cluster.artifacts is not set); nothing changes on hosts
		{Name: "render", Plan: u.renderStep, Dry: true},
		// a killed upgrade: the control-plane node it was changing is brought back first (its API server
		// may be the one stopped while its etcd restarted)
		{Name: "resume", Run: u.resume, Skip: u.nothingToResume},
		// versions, Nodes Ready, etcd quorum, skew: refuse before anything changes
		{Name: "check", Run: u.check, Dry: true},
		// what a dry run shows: every host's files and actions, in the order they would run
		{Name: "plan", Run: u.planStep, Dry: true, Skip: func(*plan) string {
			if !u.o.DryRun {
				return "not a dry run"
			}
			return ""
		}},
		// an etcd snapshot streamed to the state directory before the first change, as kubeadm takes one
		// before it upgrades a control-plane node
		{Name: "backup", Run: do(u.backup), Skip: unless(u.noBackup)},
		// the target's images imported on every host first, so that no Pod waits for one
		{Name: "images", Run: u.importImages},
		// external etcd: every member's binary and unit, members restarted one at a time, each ready before
		// the next
		{Name: "etcd", Run: u.etcd, Skip: unless(u.noEtcdHosts)},
		// control-plane nodes one at a time: etcd, API server, controller-manager, scheduler
		{Name: "control-plane", Resume: u.controlPlanes, Skip: unless(u.limited)},
		// kube-proxy, CoreDNS, kubeadm-config, kubelet-config
		{Name: "addons", Resume: u.addons, Skip: unless(u.limited)},
		// kubelets: control-plane nodes one at a time, then workers in batches, drained first
		{Name: "kubelets", Resume: u.kubelets},
		// every Node Ready at the target; the record of the upgrade removed
		{Name: "done", Run: u.done},
	}
}

// noEtcdHosts skips the etcd step: etcd is stacked (each control-plane node's roll upgrades its member),
// or the run is --limit's workers.
func (u *upgradeRun) noEtcdHosts() string {
	switch {
	case u.limit:
		return "--limit: workers only"
	case !u.e.Inv.ExternalEtcd():
		return "etcd is stacked: each control-plane node's roll upgrades its member"
	}
	return ""
}

// etcd upgrades an external etcd cluster to the target's etcd before any API server: every etcd host gets
// the target's etcd binaries, unit and certificates, then the members whose binary or unit changed restart
// one at a time, each ready again before the next (the check refused a cluster without quorum), and every
// member is healthy and listed at the end (startEtcd). A member restarted already (a resumed run) is left.
func (u *upgradeRun) etcd(ctx context.Context, p *plan) error {
	return u.only(etcdFile).rollEtcd(ctx, p, "etcd")
}

func (u *upgradeRun) limited() string {
	if u.limit {
		return "--limit: workers only"
	}
	return ""
}

func (u *upgradeRun) renderStep(ctx context.Context, p *plan) (*plan, error) {
	p, err := u.render(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, ch := range p.rendered.Changes {
		u.res.Renewed = append(u.res.Renewed, ch.What)
	}
	return p, u.prepare(p)
}

// planStep records, without changing anything, what each host would receive, and lists the order.
func (u *upgradeRun) planStep(ctx context.Context, p *plan) error {
	if _, err := u.push(ctx, p, "plan", names(p.hosts), u.e.Forks); err != nil {
		return err
	}
	if err := u.startKubelet(ctx, p, "plan", names(p.hosts)); err != nil {
		return err
	}
	cur := images.For(u.e.Inv.Cluster.ImageRepository, u.res.From)
	add := func(format string, a ...any) { u.res.Order = append(u.res.Order, fmt.Sprintf(format, a...)) }
	if len(u.res.Renewed) > 0 {
		add("renew %d control-plane certificates and kubeconfigs (in the state directory; pushed with each node)", len(u.res.Renewed))
	}
	if u.noBackup() == "" {
		add("take an etcd snapshot into %s (0600, its integrity checked)", filepath.Dir(statedir.JournalPath(u.e.StateDir, kindUpgrade)))
	}
	add("import the images of %s on %d hosts", u.res.To, len(p.hosts))
	if !u.limit {
		for _, h := range u.etcdHosts(p) {
			add("%s: etcd's binaries and unit of %s (etcd %s), restarted alone, ready before the next member", h.Name, u.res.To, p.images.Etcd)
		}
		for _, h := range u.controlPlaneHosts(p) {
			if cur.Etcd != p.images.Etcd && !u.e.Inv.ExternalEtcd() {
				add("%s: etcd %s → %s, alone, with its API server stopped (the other API servers serve)", h.Name, cur.Etcd, p.images.Etcd)
			}
			add("%s: kube-apiserver, kube-controller-manager, kube-scheduler → %s; wait until they are Ready and its API server answers", h.Name, u.res.To)
		}
		add("add-ons: kube-proxy → %s, CoreDNS %s → %s (Corefile migrated), kubeadm-config and kubelet-config", u.res.To, cur.CoreDNS, p.images.CoreDNS)
		for _, h := range u.controlPlaneHosts(p) {
			add("%s: cordon, drain, %skubelet → %s, restart, Ready, %suncordon", h.Name, hookWords(u.e.Inv, h, inventory.HookUpgrade, "before"), u.res.To, hookWords(u.e.Inv, h, inventory.HookUpgrade, "after"))
		}
	}
	batches := u.workerBatches(p)
	for i, batch := range batches {
		for _, h := range batch {
			add("%s (workers batch %d of %d): cordon, drain (up to %s), %skubelet → %s, restart, Ready, %suncordon", h.Name, i+1, len(batches), u.o.DrainTimeout,
				hookWords(u.e.Inv, h, inventory.HookUpgrade, "before"), u.res.To, hookWords(u.e.Inv, h, inventory.HookUpgrade, "after"))
		}
	}
	return nil
}

// noBackup skips the backup step: --no-backup, --limit (no control-plane node changes), a dry run (the
// plan says it), or a resumed run whose first run took it.
func (u *upgradeRun) noBackup() string {
	switch {
	case u.o.NoBackup:
		return "--no-backup"
	case u.limit:
		return "--limit: no control-plane node changes"
	case u.st != nil && u.st.Data.Backup != nil:
		return "taken by the run this one resumes: " + u.st.Data.Backup.File
	}
	return ""
}

// backup streams a snapshot of etcd from a healthy member to the state directory, beside the run's
// journal, and records it there (a resumed run takes no other). The file stays when the upgrade is done.
func (u *upgradeRun) backup(ctx context.Context) error {
	if u.o.DryRun {
		return nil
	}
	dir := filepath.Dir(statedir.JournalPath(u.e.StateDir, kindUpgrade))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name := fmt.Sprintf("etcd-before-upgrade-%s-to-%s-%s.db", u.res.From, u.res.To, u.o.Now().UTC().Format("20060102-150405"))
	snap, err := EtcdSnapshot(ctx, u.e, filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("the etcd snapshot before the upgrade (--no-backup goes without): %w", err)
	}
	u.res.Backup = snap
	u.e.say("backup", snap.Host, "etcd snapshot %s: %d bytes, revision %d, sha256 %s", snap.File, snap.Size, snap.Revision, snap.SHA256)
	return u.st.Update(func(j *statedir.Journal[upgradeData]) { j.Data.Backup = snap })
}

func (u *upgradeRun) workerBatches(p *plan) [][]*inventory.Host {
	var out [][]*inventory.Host
	for ws := p.workers(); len(ws) > 0; {
		n := min(u.o.MaxUnavailable, len(ws))
		out = append(out, ws[:n])
		ws = ws[n:]
	}
	return out
}

// importImages imports the target's images on every host of the run (in registry mode the hosts pull them as
// Pods start).
func (u *upgradeRun) importImages(ctx context.Context, p *plan) error {
	if u.e.Inv.Cluster.Registry.Pull {
		return nil
	}
	// the archives replaced are kept: a rollback imports the old images again (unused, the kubelet may
	// remove them meanwhile)
	_, err := u.only(imageFile).keeping(u.keptDir(phaseControlPlane)).push(ctx, p, "images", names(p.hosts), u.e.Forks)
	return err
}

// controlPlanes rolls the control-plane nodes one at a time with the target's static Pods and the renewed
// certificates (rollControlPlane: etcd alone first when its manifest changes), the kubelets left as they
// are until every API server runs the target.
func (u *upgradeRun) controlPlanes(ctx context.Context, p *plan, g progress) error {
	cp := u.only(controlPlaneFile).keeping(u.keptDir(phaseControlPlane))
	for _, h := range u.controlPlaneHosts(p) {
		if err := g.Begin(h.Name); err != nil {
			return err
		}
		start := time.Now()
		changed, err := cp.rollControlPlane(ctx, p, "control-plane", h)
		if err != nil && ctx.Err() == nil && !u.o.DryRun {
			// its new static Pods did not become healthy: it and the nodes rolled before are put back
			return u.rollBack(ctx, p, h, fmt.Errorf("%s: %w", h.Name, err))
		}
		if err != nil {
			return fmt.Errorf("%s: %w (the other control-plane nodes are untouched; the same command resumes, or upgrade --rollback puts it back)", h.Name, err)
		}
		if changed {
			u.res.ControlPlanes = append(u.res.ControlPlanes, PhaseTiming{Name: h.Name, DurationMS: time.Since(start).Milliseconds()})
		}
		if err := g.Finish(h.Name); err != nil {
			return err
		}
	}
	return nil
}

// addons applies kube-proxy, CoreDNS (the cluster's Corefile migrated to the new CoreDNS, not replaced),
// kubeadm-config and kubelet-config at the target, and waits for both rollouts.
func (u *upgradeRun) addons(ctx context.Context, p *plan, g progress) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	objs, err := u.bootstrapObjects(p)
	if err != nil {
		return err
	}
	cm, err := admin.Kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CoreDNS's Corefile: %w", err)
	}
	from := p.images.CoreDNS
	if dep, err := admin.Kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{}); err == nil && len(dep.Spec.Template.Spec.Containers) > 0 {
		from = images.TagOf(dep.Spec.Template.Spec.Containers[0].Image)
	}
	corefile, notes := addons.MigrateCorefile(from, p.images.CoreDNS, cm.Data["Corefile"])
	for _, n := range notes {
		u.e.say("addons", "", "%s", n)
	}
	u.res.Notes = append(u.res.Notes, notes...)
	for _, o := range objs {
		if c, ok := o.(*corev1.ConfigMap); ok && c.Name == "coredns" && c.Namespace == metav1.NamespaceSystem && corefile != "" {
			c.Data["Corefile"] = corefile
		}
	}
	applied, err := admin.ApplyAll(ctx, objs...)
	if err != nil {
		return err
	}
	var changed []string
	for _, a := range applied {
		if a.Changed {
			changed = append(changed, a.String())
		}
	}
	u.e.say("addons", "", "%d objects applied, changed: %s", len(applied), strings.Join(changed, ", "))
	err = u.e.poll(ctx, "addons", "", u.o.Timeout, func() (bool, string, error) {
		waiting, err := nodes.RolloutsWaiting(ctx, admin.Kube)
		if err != nil {
			return false, "the API (" + firstLine(err.Error()) + ")", nil
		}
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	if err != nil {
		return err
	}
	return g.Complete()
}

// kubelets upgrades the kubelets: control-plane nodes one at a time, then the workers MaxUnavailable at
// a time.
func (u *upgradeRun) kubelets(ctx context.Context, p *plan, g progress) error {
	if !u.limit {
		for _, h := range u.controlPlaneHosts(p) {
			if err := u.kubelet(ctx, p, g, []*inventory.Host{h}); err != nil {
				return err
			}
		}
	}
	for _, batch := range u.workerBatches(p) {
		if err := u.kubelet(ctx, p, g, batch); err != nil {
			return err
		}
	}
	return nil
}

// kubelet upgrades a batch of nodes' kubelets together: cordon, drain, push every file (the kubelet, its
// configuration, the runtime), restart, Ready at the target, uncordon. A node whose kubelet already runs
// the target with every file in place is left alone (uncordoned if the upgrade had cordoned it).
func (u *upgradeRun) kubelet(ctx context.Context, p *plan, g progress, batch []*inventory.Host) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	if err := g.Begin(names(batch)...); err != nil {
		return err
	}
	start := time.Now()
	todo, err := u.drain(ctx, g, admin, batch)
	if err != nil {
		return err
	}
	// the inventory's hooks, inside the drain window
	if err := u.e.runHooks(ctx, hooks.Point{Command: inventory.HookUpgrade, When: "before"}, todo, false, nil); err != nil {
		return err
	}
	if _, err := u.keeping(u.keptDir(phaseKubelet)).push(ctx, p, "kubelets", names(todo), len(todo)); err != nil {
		return err
	}
	if err := u.startKubelet(ctx, p, "kubelets", names(todo)); err != nil {
		return err
	}
	if err := u.waitKubelets(ctx, admin, todo); err != nil {
		if failed := u.notBack(ctx, admin, todo); len(failed) > 0 && ctx.Err() == nil && !u.o.DryRun {
			for _, h := range batch {
				if slices.Contains(failed, h) {
					continue
				}
				// at the target: done, as if its batch had been alone
				if err := u.drainWindow().close(ctx, admin.Kube, h); err != nil {
					return err
				}
				if err := g.Finish(h.Name); err != nil {
					return err
				}
			}
			return u.rollBackKubelets(ctx, p, failed, err)
		}
		return err
	}
	if err := u.e.runHooks(ctx, hooks.Point{Command: inventory.HookUpgrade, When: "after"}, todo, false, nil); err != nil {
		return err
	}
	for _, h := range batch {
		if err := u.drainWindow().close(ctx, admin.Kube, h); err != nil {
			return err
		}
		if err := g.Finish(h.Name); err != nil {
			return err
		}
	}
	if len(todo) > 0 {
		d := time.Since(start).Milliseconds()
		for _, h := range todo {
			u.res.Kubelets = append(u.res.Kubelets, PhaseTiming{Name: h.Name, DurationMS: d})
		}
	}
	return nil
}

// drain cordons and drains the nodes of a batch that are not at the target yet (todo).
func (u *upgradeRun) drain(ctx context.Context, g progress, admin *apiclient.Client, batch []*inventory.Host) ([]*inventory.Host, error) {
	var todo []*inventory.Host
	for _, h := range batch {
		n, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		if n.Status.NodeInfo.KubeletVersion == u.res.To && (g.Done(h.Name) || !u.wasCurrent[h.Name]) {
			continue // upgraded already (a run killed while it was being upgraded does it again)
		}
		todo = append(todo, h)
	}
	return todo, u.drainWindow().open(ctx, admin.Kube, todo)
}

// drainWindow is the kubelets' drain window; the journal keeps what it cordoned.
func (u *upgradeRun) drainWindow() drainWindow {
	st := u.st
	if u.o.DryRun {
		st = nil // read, never written
	}
	return drainWindow{e: u.e, play: "kubelets", timeout: u.o.DrainTimeout,
		ours: journalCordons[upgradeData]{st: st, list: func(d *upgradeData) *[]string { return &d.Cordoned }}}
}

// waitKubelets waits for the nodes' kubelets to report the target and Ready.
func (u *upgradeRun) waitKubelets(ctx context.Context, admin *apiclient.Client, todo []*inventory.Host) error {
	return u.e.poll(ctx, "kubelets", "", u.o.Timeout, func() (bool, string, error) {
		var waiting []string
		for _, h := range todo {
			n, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			switch {
			case err != nil:
				waiting = append(waiting, h.NodeName+" (API: "+firstLine(err.Error())+")")
			case n.Status.NodeInfo.KubeletVersion != u.res.To:
				waiting = append(waiting, h.NodeName+" (kubelet "+n.Status.NodeInfo.KubeletVersion+")")
			case !nodes.Ready(n):
				waiting = append(waiting, h.NodeName+" (not Ready)")
			}
		}
		return len(waiting) == 0, "nodes: " + strings.Join(waiting, ", "), nil
	})
}

// done waits for every Node of the run to be Ready at the target, reports them and removes the record.
func (u *upgradeRun) done(ctx context.Context, p *plan) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	if u.res.Nodes, err = nodeStatuses(ctx, admin); err != nil {
		return err
	}
	if err := u.forgetKept(ctx, names(p.hosts)); err != nil {
		return err
	}
	if u.limit {
		// Other workers may still be behind: the record stays for the run without --limit.
		return nil
	}
	return u.st.Remove()
}
