package playbooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Hop is one minor version of an upgrade that passes several: its target and its artifacts directory
// ("": the inventory's for the final target, else the per-version cache, pulled into).
type Hop struct {
	To        string `json:"to"`
	Artifacts string `json:"artifacts,omitempty"`
}

// UpgradePath is the hops from the oldest API server's version (from) to to: one per minor release after
// from's, the last to itself. The version of each minor passed through is, in this order, the one of the
// artifacts directories given for it (given: version → directory), the one named in via, the patch
// release clusterctl is tested with (inventory.TestedPatches). A patch upgrade, or one minor, is one hop.
func UpgradePath(from, to *version.Version, given map[string]string, via []string) ([]Hop, error) {
	if from.Major() != to.Major() || to.LessThan(from) {
		return nil, fmt.Errorf("%w: v%s to v%s is not an upgrade", ErrUpgradeRefused, from, to)
	}
	byMinor := map[uint]string{}
	for _, v := range via {
		pv, err := version.ParseSemantic(v)
		if err != nil || pv.Major() != to.Major() {
			return nil, fmt.Errorf("--via %q is not a Kubernetes version", v)
		}
		byMinor[pv.Minor()] = "v" + pv.String()
	}
	dirs := map[string]string{}
	for v, dir := range given {
		pv, err := version.ParseSemantic(v)
		if err != nil {
			return nil, fmt.Errorf("artifacts %s hold %q, not a Kubernetes version", dir, v)
		}
		if other, ok := byMinor[pv.Minor()]; ok && other != "v"+pv.String() && pv.Minor() != to.Minor() {
			return nil, fmt.Errorf("--via %s and the artifacts %s (Kubernetes v%s) name two versions of v1.%d: give one", other, dir, pv, pv.Minor())
		}
		byMinor[pv.Minor()] = "v" + pv.String()
		dirs["v"+pv.String()] = dir
	}
	var hops []Hop
	for minor := from.Minor() + 1; minor < to.Minor(); minor++ {
		v := byMinor[minor]
		if v == "" {
			v = inventory.TestedPatches[int(minor)]
		}
		if v == "" {
			return nil, fmt.Errorf("%w: v%s to v%s passes v1.%d, which clusterctl has no version of: name one (--via v1.%d.N) or give its artifacts (--artifacts DIR)",
				ErrUpgradeRefused, from, to, minor, minor)
		}
		hops = append(hops, Hop{To: v, Artifacts: dirs[v]})
	}
	final := "v" + to.String()
	hops = append(hops, Hop{To: final, Artifacts: dirs[final]})
	var unused []string
	for v, dir := range dirs {
		if !slices.ContainsFunc(hops, func(h Hop) bool { return h.To == v }) {
			unused = append(unused, dir+" (Kubernetes "+v+")")
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		return nil, fmt.Errorf("--artifacts %s: not on the way from v%s to v%s", strings.Join(unused, ", "), from, to)
	}
	return hops, nil
}

// PathLine is the path as one line: "v1.35.4 → v1.36.3 → v1.37.2".
func PathLine(from string, hops []Hop) string {
	parts := []string{from}
	for _, h := range hops {
		parts = append(parts, h.To)
	}
	return strings.Join(parts, " → ")
}

// UpgradeAll upgrades the cluster to the inventory's version (cluster.kubernetesVersion), one minor release
// at a time (UpgradePath): each hop a whole upgrade (its checks and readiness report, its backup, the
// control planes, the add-ons, every kubelet, every Node Ready at that version) before the next. A killed
// run is resumed by the same command: the hop under way (the journal's) is finished, then the others. A dry
// run plans the first hop in full and lists the others, which can be planned only once the cluster is at
// the version before them. The result is the last hop's, with the path and every hop's result.
func UpgradeAll(ctx context.Context, e *Env, o UpgradeOptions, given map[string]string, via []string) (*UpgradeResult, error) {
	if o.Rollback {
		// the hop under way (the journal's), whatever the command line's target
		st, err := statedir.OpenJournal[upgradeData](statedir.JournalPath(e.StateDir, kindUpgrade), kindUpgrade)
		if err != nil {
			return nil, err
		}
		if st != nil && st.Key != e.Inv.Cluster.KubernetesVersion {
			e.Inv.Cluster.KubernetesVersion, e.Inv.Cluster.Artifacts = st.Key, given[st.Key]
		}
		return Upgrade(ctx, e, o)
	}
	to, err := version.ParseSemantic(e.Inv.Cluster.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	from, err := lowestAPIServer(ctx, e)
	if err != nil {
		return nil, err
	}
	if st, err := statedir.OpenJournal[upgradeData](statedir.JournalPath(e.StateDir, kindUpgrade), kindUpgrade); err == nil && st != nil {
		// a killed run: the hop under way is finished first, from where it started, at its version
		via = append(slices.Clone(via), st.Key)
		if started, err := version.ParseSemantic(st.Data.From); err == nil && started.LessThan(from) {
			from = started
		}
	}
	if from.GreaterThan(to) || from.EqualTo(to) {
		// nothing to walk: the single run refuses a downgrade, or finishes what is left (kubelets)
		if dir := given["v"+to.String()]; dir != "" {
			e.Inv.Cluster.Artifacts = dir
		}
		return Upgrade(ctx, e, o)
	}
	hops, err := UpgradePath(from, to, given, via)
	if err != nil {
		return nil, err
	}
	if len(hops) > 1 {
		e.say("path", "", "%d minor releases: %s", len(hops), PathLine("v"+from.String(), hops))
	}
	finalArtifacts := e.Inv.Cluster.Artifacts
	var all []*UpgradeResult
	for i, hop := range hops {
		e.Inv.Cluster.KubernetesVersion, e.Inv.Cluster.Artifacts = hop.To, hop.Artifacts
		if hop.Artifacts == "" && i == len(hops)-1 {
			e.Inv.Cluster.Artifacts = finalArtifacts
		}
		if len(hops) > 1 {
			e.say("path", "", "hop %d of %d: to %s", i+1, len(hops), hop.To)
		}
		res, err := Upgrade(ctx, e, o)
		if res != nil {
			all = append(all, res)
		}
		if err != nil || o.DryRun {
			if res != nil && o.DryRun {
				for _, later := range hops[i+1:] {
					res.Order = append(res.Order, fmt.Sprintf("then to %s: the same steps, planned once the cluster is at %s", later.To, hop.To))
				}
			}
			return withPath(all, from, hops), err
		}
	}
	return withPath(all, from, hops), nil
}

// withPath is the last hop's result with the path and, when there are several, every hop's.
func withPath(all []*UpgradeResult, from *version.Version, hops []Hop) *UpgradeResult {
	if len(all) == 0 {
		return nil
	}
	last := *all[len(all)-1]
	last.Path = []string{"v" + from.String()}
	for _, h := range hops {
		last.Path = append(last.Path, h.To)
	}
	if len(all) > 1 {
		last.Hops = all
		last.From = "v" + from.String()
	}
	return &last
}

// lowestAPIServer is the oldest version the control-plane nodes' API servers run, each asked through its
// own connection; those that do not answer (one stopped by a killed run) are passed over.
func lowestAPIServer(ctx context.Context, e *Env) (*version.Version, error) {
	var lowest *version.Version
	var errs []string
	for _, h := range e.Inv.ControlPlanes() {
		c, err := e.nodeClient(ctx, h)
		var v *version.Version
		if err == nil {
			v, err = serverVersion(ctx, c)
		}
		if err != nil {
			errs = append(errs, h.Name+": "+firstLine(err.Error()))
			continue
		}
		if lowest == nil || v.LessThan(lowest) {
			lowest = v
		}
	}
	if lowest == nil {
		return nil, fmt.Errorf("no API server answers (%s)", strings.Join(errs, "; "))
	}
	return lowest, nil
}
