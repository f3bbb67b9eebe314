package charts

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/textdiff"
)

// What a plan does with an add-on.
const (
	Install   = "install"
	Upgrade   = "upgrade"
	Unchanged = "unchanged"
	Uninstall = "uninstall"
)

// Desired is an add-on as the inventory wants it: its chart and values, or its manifests' objects.
type Desired struct {
	Addon  *inventory.Addon
	Chart  *Chart         // a chart add-on's
	Values map[string]any // a chart add-on's
	Set    *ManifestSet   // a manifests add-on's
}

// Change is what up does with one add-on, and why.
type Change struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	// Chart is chart@version (the new one), or "manifests".
	Chart string `json:"chart"`
	// From is the installed chart@version an upgrade starts from.
	From string `json:"from,omitempty"`
	// Revision is the installed revision (0 when none).
	Revision int `json:"revision,omitempty"`
	// Reasons say why an upgrade: the chart's version, its content, the values, the objects.
	Reasons []string `json:"reasons,omitempty"`
	// Diff is the values' (a manifests add-on's objects') unified diff, installed to wanted.
	Diff string `json:"diff,omitempty"`

	desired *Desired
	// recover is what an interrupted or failed earlier run left that the change clears first: the
	// release is uninstalled (a first install that never finished) or rolled back (an upgrade) to
	// revision rollbackTo, the newest that was deployed.
	recover    string
	rollbackTo int
}

// Line describes the change in a sentence: as planned (verb: "would install"), about to happen
// ("install"), or done ("installed").
func (ch Change) Line(verb string) string {
	switch ch.Action {
	case Unchanged:
		return fmt.Sprintf("add-on %s: %s unchanged (revision %d)", ch.Name, ch.Chart, ch.Revision)
	case Upgrade:
		return fmt.Sprintf("add-on %s: %s %s → %s in %s (revision %d): %s", ch.Name, verb, ch.From, ch.Chart, ch.Namespace, ch.Revision, strings.Join(ch.Reasons, "; "))
	}
	return fmt.Sprintf("add-on %s: %s %s in %s", ch.Name, verb, ch.Chart, ch.Namespace)
}

// Done is the past tense of a change's action (installed, upgraded, uninstalled).
func (ch Change) Done() string {
	return map[string]string{Install: "installed", Upgrade: "upgraded", Uninstall: "uninstalled", Unchanged: "unchanged"}[ch.Action]
}

// Release is an installed add-on as addons list shows it.
type Release struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Chart     string    `json:"chart"`
	Version   string    `json:"version"`
	Revision  int       `json:"revision"`
	Status    string    `json:"status"`
	Updated   time.Time `json:"updated"`
	// Kind is chart or manifests.
	Kind string `json:"kind"`
}

// ReleasedCharts are the Helm releases clusterctl installed (marked), in every namespace.
func (c *Client) ReleasedCharts(ctx context.Context) ([]*release.Release, error) {
	cfg, err := c.action("")
	if err != nil {
		return nil, err
	}
	l := action.NewList(cfg)
	l.AllNamespaces = true
	l.StateMask = action.ListAll
	l.Selector = ManagedLabel + "=true"
	rs, err := l.Run()
	if err != nil {
		return nil, fmt.Errorf("listing Helm releases: %w", err)
	}
	var out []*release.Release
	for _, r := range rs {
		if rel, ok := r.(*release.Release); ok {
			out = append(out, rel)
		}
	}
	return out, ctx.Err()
}

// Plan compares the inventory's add-ons with what the cluster has: the releases and records clusterctl
// marked. Add-ons gone from the inventory are uninstalled first, then the others are installed or
// upgraded in the inventory's order. A release of an add-on's name that clusterctl did not install is an
// error: it is never taken over.
func (c *Client) Plan(ctx context.Context, want []*Desired) ([]Change, error) {
	released, err := c.ReleasedCharts(ctx)
	if err != nil {
		return nil, err
	}
	records, err := c.records(ctx)
	if err != nil {
		return nil, err
	}
	wanted := map[string]*Desired{}
	for _, d := range want {
		wanted[d.Addon.Name] = d
	}
	var out []Change
	for _, r := range released {
		if d := wanted[r.Name]; d == nil || !d.Addon.IsChart() {
			out = append(out, Change{Name: r.Name, Namespace: r.Namespace, Action: Uninstall, Chart: chartOf(r), Revision: r.Version})
		}
	}
	for _, rec := range records {
		if d := wanted[rec.Name]; d == nil || d.Addon.IsChart() {
			out = append(out, Change{Name: rec.Name, Namespace: rec.Namespace, Action: Uninstall, Chart: "manifests", Revision: rec.Revision})
		}
	}
	var errs []error
	for _, d := range want {
		var ch Change
		var err error
		if d.Addon.IsChart() {
			ch, err = c.planChart(ctx, d, released)
		} else {
			ch = c.planManifests(d, records)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ch.desired = d
		out = append(out, ch)
	}
	return out, errors.Join(errs...)
}

func chartOf(r *release.Release) string {
	if r.Chart == nil || r.Chart.Metadata == nil {
		return "?"
	}
	return r.Chart.Metadata.Name + "@" + r.Chart.Metadata.Version
}

func (c *Client) planChart(ctx context.Context, d *Desired, released []*release.Release) (Change, error) {
	a := d.Addon
	ns := a.NamespaceOrDefault()
	ch := Change{Name: a.Name, Namespace: ns, Chart: d.Chart.Metadata.Name + "@" + d.Chart.Metadata.Version}
	for _, r := range released {
		if r.Name == a.Name && r.Namespace != ns {
			return ch, fmt.Errorf("add-on %s is installed in namespace %s, the inventory says %s: a release cannot move; take the add-on out of the inventory, run up (it is uninstalled), then add it back", a.Name, r.Namespace, ns)
		}
	}
	cfg, err := c.action(ns)
	if err != nil {
		return ch, err
	}
	hist, err := cfg.Releases.History(a.Name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return ch, fmt.Errorf("add-on %s: reading its release: %w", a.Name, err)
	}
	var rels []*release.Release
	for _, r := range hist {
		if rel, ok := r.(*release.Release); ok {
			rels = append(rels, rel)
		}
	}
	ch, err = decide(d, ns, rels)
	if err == nil {
		err = ctx.Err()
	}
	return ch, err
}

// decide is a chart add-on's change given its release's history (every revision, any order): install
// when there is none, or when the first install never finished; roll back an interrupted upgrade first;
// upgrade when the chart, its content or the values differ from the last revision's; else unchanged. A
// release clusterctl did not mark is an error.
func decide(d *Desired, ns string, hist []*release.Release) (Change, error) {
	a := d.Addon
	ch := Change{Name: a.Name, Namespace: ns, Chart: d.Chart.Metadata.Name + "@" + d.Chart.Metadata.Version}
	// settled is the newest revision that was once deployed (deployed, or superseded by a later one)
	var last, settled *release.Release
	for _, rel := range hist {
		if last == nil || rel.Version > last.Version {
			last = rel
		}
		if rel.Info != nil && (rel.Info.Status == rcommon.StatusDeployed || rel.Info.Status == rcommon.StatusSuperseded) &&
			(settled == nil || rel.Version > settled.Version) {
			settled = rel
		}
	}
	if last == nil {
		ch.Action = Install
		ch.Diff = valuesDiff(nil, d.Values)
		return ch, nil
	}
	if last.Labels[ManagedLabel] != "true" {
		return ch, fmt.Errorf("add-on %s: a Helm release %s in namespace %s exists that clusterctl did not install (chart %s, revision %d): rename the add-on, or uninstall that release (helm uninstall %s -n %s) to let clusterctl install its own",
			a.Name, a.Name, ns, chartOf(last), last.Version, a.Name, ns)
	}
	ch.Revision, ch.From = last.Version, chartOf(last)
	status := rcommon.StatusUnknown
	if last.Info != nil {
		status = last.Info.Status
	}
	switch {
	case settled == nil && (status.IsPending() || status == rcommon.StatusFailed):
		// a first install that never finished: start again
		ch.Action, ch.recover = Install, Uninstall
		ch.Reasons = append(ch.Reasons, fmt.Sprintf("revision %d is %s", last.Version, status))
		ch.Diff = valuesDiff(nil, d.Values)
		return ch, nil
	case status.IsPending():
		ch.recover, ch.rollbackTo = "rollback", settled.Version
		ch.Reasons = append(ch.Reasons, fmt.Sprintf("revision %d is %s (an interrupted run): rolled back to %d first", last.Version, status, settled.Version))
		last = settled
	case status != rcommon.StatusDeployed:
		ch.Reasons = append(ch.Reasons, fmt.Sprintf("revision %d is %s", last.Version, status))
	}
	if from := chartOf(last); from != ch.Chart {
		ch.Reasons = append(ch.Reasons, "chart "+from+" → "+ch.Chart)
	} else if last.Labels[DigestLabel] != digestLabel(d.Chart.Digest) {
		ch.Reasons = append(ch.Reasons, "the chart's content changed")
	}
	old, _ := normalize(last.Config)
	if diff := valuesDiff(old, d.Values); diff != "" {
		ch.Reasons = append(ch.Reasons, "values")
		ch.Diff = diff
	}
	ch.Action = Unchanged
	if len(ch.Reasons) > 0 {
		ch.Action = Upgrade
	}
	return ch, nil
}

func digestLabel(d string) string { return d[:min(32, len(d))] }

// valuesDiff is the unified diff of two sets of values as YAML ("" when equal).
func valuesDiff(old, new map[string]any) string {
	if len(old) == 0 && len(new) == 0 || reflect.DeepEqual(old, new) {
		return ""
	}
	return textdiff.Unified("installed values", "inventory values", yamlOf(old), yamlOf(new), 3)
}

func yamlOf(v map[string]any) string {
	if len(v) == 0 {
		return ""
	}
	out, err := sigsyaml.Marshal(v) // as helm get values prints them
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(out)
}

// Progress says what an apply is doing (a line for the run's output).
type Progress func(addon, format string, args ...any)

// Apply carries out a plan's changes in order; the first that fails stops it, with the reason the
// add-on's workloads are not ready when they are not.
func (c *Client) Apply(ctx context.Context, plan []Change, say Progress) error {
	for _, ch := range plan {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch {
		case ch.Action == Unchanged:
			continue
		case ch.Action == Uninstall && ch.Chart == "manifests":
			err = c.uninstallManifests(ctx, ch.Name, say)
		case ch.Action == Uninstall:
			err = c.uninstallChart(ctx, ch.Name, ch.Namespace, DefaultUninstallTimeout)
			if err == nil {
				say(ch.Name, "uninstalled (chart %s, namespace %s)", ch.Chart, ch.Namespace)
			}
		case ch.desired.Addon.IsChart():
			err = c.applyChart(ctx, ch, say)
		default:
			err = c.applyManifests(ctx, ch, say)
		}
		for _, w := range c.takeWarnings() {
			say(ch.Name, "the API server warns: %s", w)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DefaultUninstallTimeout bounds the removal of an add-on taken out of the inventory.
const DefaultUninstallTimeout = 5 * time.Minute

func (c *Client) applyChart(ctx context.Context, ch Change, say Progress) error {
	a := ch.desired.Addon
	ns := ch.Namespace
	if err := c.ensureNamespace(ctx, ns, a.PodSecurity); err != nil {
		return fmt.Errorf("add-on %s: namespace %s: %w", a.Name, ns, err)
	}
	cfg, err := c.action(ns)
	if err != nil {
		return err
	}
	switch ch.recover {
	case Uninstall:
		if err := c.uninstallChart(ctx, a.Name, ns, a.TimeoutOrDefault()); err != nil {
			return err
		}
	case "rollback":
		rb := action.NewRollback(cfg)
		rb.Version, rb.Timeout = ch.rollbackTo, a.TimeoutOrDefault()
		rb.MaxHistory = maxHistory
		if err := rb.Run(a.Name); err != nil {
			return fmt.Errorf("add-on %s: rolling back the interrupted upgrade: %w", a.Name, err)
		}
	}
	labels := map[string]string{ManagedLabel: "true", DigestLabel: digestLabel(ch.desired.Chart.Digest)}
	strategy := kube.HookOnlyStrategy
	if a.Waits() {
		strategy = kube.StatusWatcherStrategy
	}
	waitOpts := []kube.WaitOption{kube.WithWaitContext(ctx)}
	start := time.Now()
	var rel any
	if ch.Action == Install {
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace, inst.Labels = a.Name, ns, labels
		inst.Timeout, inst.WaitStrategy, inst.WaitOptions, inst.WaitForJobs = a.TimeoutOrDefault(), strategy, waitOpts, a.Waits()
		inst.ServerSideApply = true
		inst.Description = "installed by clusterctl"
		rel, err = inst.RunWithContext(ctx, ch.desired.Chart.Chart, ch.desired.Values)
	} else {
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Labels = ns, labels
		up.Timeout, up.WaitStrategy, up.WaitOptions, up.WaitForJobs = a.TimeoutOrDefault(), strategy, waitOpts, a.Waits()
		up.ServerSideApply = "auto"
		up.ResetValues = true // exactly the inventory's values, never merged with the last ones
		up.MaxHistory = maxHistory
		up.Description = "upgraded by clusterctl: " + strings.Join(ch.Reasons, "; ")
		rel, err = up.RunWithContext(ctx, a.Name, ch.desired.Chart.Chart, ch.desired.Values)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := fmt.Sprintf("add-on %s: %s of chart %s: %v", a.Name, ch.Action, ch.Chart, err)
		if r, ok := rel.(*release.Release); ok && r != nil {
			if why := c.notReady(ctx, ns, r.Manifest); why != "" {
				msg += "\n" + why
			}
		}
		return errors.New(msg)
	}
	rev := 0
	if r, ok := rel.(*release.Release); ok && r != nil {
		rev = r.Version
	}
	say(a.Name, "%s %s in %s (revision %d) in %s", ch.Done(), ch.Chart, ns, rev, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// maxHistory is how many revisions of a release are kept (helm's default keeps them all).
const maxHistory = 10

func (c *Client) uninstallChart(ctx context.Context, name, namespace string, timeout time.Duration) error {
	cfg, err := c.action(namespace)
	if err != nil {
		return err
	}
	u := action.NewUninstall(cfg)
	u.Timeout = timeout
	u.WaitStrategy = kube.StatusWatcherStrategy
	u.WaitOptions = []kube.WaitOption{kube.WithWaitContext(ctx)}
	u.IgnoreNotFound = true
	if _, err := u.Run(name); err != nil {
		return fmt.Errorf("uninstalling add-on %s (namespace %s): %w", name, namespace, err)
	}
	return ctx.Err()
}

// List is every add-on clusterctl installed: its Helm releases and its manifests records.
func (c *Client) List(ctx context.Context) ([]Release, error) {
	rels, err := c.ReleasedCharts(ctx)
	if err != nil {
		return nil, err
	}
	var out []Release
	for _, r := range rels {
		lr := Release{Name: r.Name, Namespace: r.Namespace, Revision: r.Version, Kind: "chart"}
		if r.Chart != nil && r.Chart.Metadata != nil {
			lr.Chart, lr.Version = r.Chart.Metadata.Name, r.Chart.Metadata.Version
		}
		if r.Info != nil {
			lr.Status, lr.Updated = r.Info.Status.String(), r.Info.LastDeployed
		}
		out = append(out, lr)
	}
	recs, err := c.records(ctx)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		out = append(out, Release{Name: rec.Name, Namespace: rec.Namespace, Chart: "manifests", Revision: rec.Revision,
			Status: "deployed", Updated: rec.Applied, Kind: "manifests"})
	}
	slices.SortFunc(out, func(a, b Release) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out, nil
}
