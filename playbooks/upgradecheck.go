package playbooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/readiness"
)

// check refuses, with every reason found, an upgrade that would leave the cluster outside what upstream
// supports or that starts from a cluster in trouble.
func (u *upgradeRun) check(ctx context.Context, p *plan) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	var reasons []string
	// API servers: every control-plane Node's own, through its SSH connection.
	list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var apiServers, kubelets []hostVersion
	for _, h := range u.e.Inv.ControlPlanes() {
		if byName[h.NodeName] == nil {
			reasons = append(reasons, fmt.Sprintf("control-plane host %s is not a Node of the cluster: add it first (clusterctl add-node)", h.Name))
			continue
		}
		v, err := u.apiServerVersion(ctx, h)
		if err != nil && u.current(h.Name) {
			continue // being upgraded by a run that was interrupted
		}
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("the API server on %s does not answer: %v", h.Name, err))
			continue
		}
		apiServers = append(apiServers, hostVersion{h.Name, v})
	}
	for _, h := range u.e.Inv.Hosts {
		if n := byName[h.NodeName]; n != nil {
			if kv, err := version.ParseGeneric(n.Status.NodeInfo.KubeletVersion); err == nil {
				kubelets = append(kubelets, hostVersion{h.NodeName, kv})
			}
		}
	}
	for _, h := range p.workers() {
		if byName[h.NodeName] == nil {
			reasons = append(reasons, fmt.Sprintf("worker %s is not a Node of the cluster: join it first (clusterctl add-node %s), or leave it out of the inventory", h.Name, h.Name))
		}
	}
	from, hard, skew := versionReasons(u.to, apiServers, kubelets, u.limit)
	reasons = append(reasons, hard...)
	if from != nil && u.res.From == "" {
		u.res.From = "v" + from.String()
		u.keepFrom()
	}
	ec, err := u.e.etcd(ctx)
	if err != nil {
		reasons = append(reasons, fmt.Sprintf("etcd does not answer: %v", err))
	} else {
		defer ec.Close()
		if members, err := ec.List(ctx); err != nil {
			reasons = append(reasons, fmt.Sprintf("etcd lacks quorum (its members cannot be listed: %v)", err))
		} else if err := etcdmember.Quorum(members); err != nil {
			reasons = append(reasons, fmt.Sprintf("etcd lacks quorum: %v", err))
		}
	}
	if len(reasons) > 0 {
		// what no --force overrides: the version policy, hosts that are no Nodes, etcd without quorum
		return fmt.Errorf("%w:\n  - %s", ErrUpgradeRefused, strings.Join(reasons, "\n  - "))
	}
	start := time.Now()
	report := append(readiness.Skew(skew), u.readinessReport(ctx, p, admin, list.Items)...).Sorted()
	u.res.Readiness = report
	return u.judge(report, time.Since(start), len(list.Items))
}

// judge says the readiness report: each warning, then the blockers, which refuse the run unless --force
// (which names what it overrides).
func (u *upgradeRun) judge(report readiness.Report, took time.Duration, nodes int) error {
	blockers := report.Blockers()
	for _, f := range report {
		if f.Severity == readiness.Warning {
			u.e.say("check", "", "%s", f.Line())
		}
	}
	u.e.say("check", "", "readiness report in %.1fs: %d blocker(s), %d warning(s)", took.Seconds(), len(blockers), len(report)-len(blockers))
	if len(blockers) == 0 {
		u.e.say("check", "", "from %s to %s: versions, %d Nodes Ready, etcd healthy, nothing blocks", u.res.From, u.res.To, nodes)
		return nil
	}
	lines := make([]string, len(blockers))
	for i, f := range blockers {
		lines[i] = f.Object + ": " + f.Message
	}
	if !u.o.Force {
		return fmt.Errorf("%w: %d blocker(s) (--force goes on anyway, overriding %s):\n  - %s", ErrUpgradeRefused, len(blockers),
			strings.Join(blockers.Checks(), ", "), strings.Join(lines, "\n  - "))
	}
	u.e.say("check", "", "--force: going on despite %d blocker(s), overriding %s", len(blockers), strings.Join(blockers.Checks(), ", "))
	for _, l := range lines {
		u.e.say("check", "", "overridden: %s", l)
	}
	return nil
}

// hostVersion is the version a host's API server or a node's kubelet runs.
type hostVersion struct {
	Name string
	V    *version.Version
}

// versionReasons is what the versions alone forbid (hard: no --force overrides it): an API server or
// kubelet newer than the target (no downgrades), a jump of more than one minor version from the oldest
// API server, and with limit (workers only) an API server behind the target (a kubelet must never be
// newer than an API server); and the kubelets outside the skew policy, more than three minor versions
// behind the target (skew: blockers of the readiness report). It returns the oldest API server's
// version, where the upgrade starts from.
func versionReasons(to *version.Version, apiServers, kubelets []hostVersion, limit bool) (*version.Version, []string, []string) {
	var reasons, skew []string
	var lowest *hostVersion
	for i, a := range apiServers {
		if a.V.GreaterThan(to) {
			reasons = append(reasons, fmt.Sprintf("the API server on %s runs v%s, newer than the target v%s: clusterctl does not downgrade", a.Name, a.V, to))
		}
		if lowest == nil || a.V.LessThan(lowest.V) {
			lowest = &apiServers[i]
		}
		if limit && a.V.LessThan(to) {
			reasons = append(reasons, fmt.Sprintf("the API server on %s runs v%s: upgrading kubelets to v%s would make them newer than an API server; upgrade the control plane first (without --limit)", a.Name, a.V, to))
		}
	}
	if lowest != nil && to.Minor() > lowest.V.Minor()+1 {
		reasons = append(reasons, fmt.Sprintf("v%s to v%s skips a minor version (the API server on %s runs v%s): upgrade to v1.%d first, one minor version at a time",
			lowest.V, to, lowest.Name, lowest.V, lowest.V.Minor()+1))
	}
	for _, k := range kubelets {
		if k.V.GreaterThan(to) {
			reasons = append(reasons, fmt.Sprintf("the kubelet on %s runs v%s, newer than the target v%s: clusterctl does not downgrade", k.Name, k.V, to))
		} else if to.Minor() > k.V.Minor()+3 {
			skew = append(skew, fmt.Sprintf("the kubelet on %s runs v%s, more than three minor versions behind v%s: upgrade it first", k.Name, k.V, to))
		}
	}
	if lowest == nil {
		return nil, reasons, skew
	}
	return lowest.V, reasons, skew
}

// apiServerVersion asks a control-plane node's own API server its version.
func (u *upgradeRun) apiServerVersion(ctx context.Context, h *inventory.Host) (*version.Version, error) {
	c, err := u.e.nodeClient(ctx, h)
	if err != nil {
		return nil, err
	}
	return serverVersion(ctx, c)
}

// serverVersion asks an API server its version (/version).
func serverVersion(ctx context.Context, c *apiclient.Client) (*version.Version, error) {
	vctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/version").Do(vctx).Raw()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, err
	}
	return version.ParseSemantic(info.GitVersion)
}
