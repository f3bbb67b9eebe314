package playbooks

import (
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/readiness"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// UpgradeOptions tune `clusterctl upgrade`.
type UpgradeOptions struct {
	// MaxUnavailable is how many workers are drained and upgraded at once (default 1).
	MaxUnavailable int
	// DrainTimeout bounds a node's drain (evictions a PodDisruptionBudget refuses are retried until then).
	DrainTimeout time.Duration
	// CertificateRenewal renews the control-plane certificates and kubeconfigs on the way, as kubeadm
	// upgrade does (those issued in the last hour are kept, so that a resumed upgrade renews nothing twice).
	CertificateRenewal bool
	// Timeout bounds each wait: a node's static Pods, its API server, a node Ready, a rollout.
	Timeout time.Duration
	DryRun  bool
	Now     func() time.Time
	// Preflight is what preflight ignores and the clock skew it allows (its hosts are the upgrade's).
	Preflight PreflightOptions
	// Force goes on despite the readiness report's blockers (each said as overridden).
	Force bool
	// NoBackup skips the etcd snapshot taken before the first change.
	NoBackup bool
	// Rollback puts back the control-plane nodes of the upgrade under way (its journal) instead of going
	// on: what a run killed during its rollback left to do.
	Rollback bool
}

// UpgradeResult is what an upgrade did, or in a dry run would do.
type UpgradeResult struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Resumed bool   `json:"resumed,omitempty"`
	// Order is the plan, in the order it runs: one line per change of a node or of the add-ons.
	Order []string `json:"order"`
	// Renewed are the certificates and kubeconfigs renewed on the way.
	Renewed []string `json:"renewed"`
	// ControlPlanes and Kubelets are how long each node's control plane and each node's kubelet took.
	ControlPlanes []PhaseTiming `json:"controlPlanes"`
	Kubelets      []PhaseTiming `json:"kubelets"`
	Notes         []string      `json:"notes,omitempty"`
	Phases        []PhaseTiming `json:"phases"`
	Nodes         []NodeStatus  `json:"nodes,omitempty"`
	Plan          []HostPlan    `json:"plan,omitempty"`
	// Preflight is the report of the checks for the target version.
	Preflight *PreflightReport `json:"preflight,omitempty"`
	// Readiness is the report made before anything changes: blockers first, then warnings.
	Readiness readiness.Report `json:"readiness"`
	// Backup is the etcd snapshot taken before the first change (a resumed run's: the one its first
	// run took).
	Backup *SnapshotResult `json:"backup,omitempty"`
	// RolledBack are the nodes put back to the version upgraded from, in the order they were.
	RolledBack []string `json:"rolledBack,omitempty"`
	// Path is the versions an upgrade of several minor releases passes, from the first; Hops each one's
	// result (when there are several).
	Path []string         `json:"path,omitempty"`
	Hops []*UpgradeResult `json:"hops,omitempty"`
}

// ErrUpgradeRefused is wrapped by the reasons an upgrade refuses to start.
var ErrUpgradeRefused = errors.New("upgrade refused")

type upgradeRun struct {
	*deployment
	o     UpgradeOptions
	res   *UpgradeResult
	st    *statedir.Journal[upgradeData] // nil in a dry run
	limit bool                           // --limit: only the run's workers
	to    *version.Version
	// wasCurrent are the hosts a killed run was changing.
	wasCurrent map[string]bool
}

// controlPlaneFile: what a control-plane node's roll pushes before its kubelet is upgraded: static Pods,
// certificates, kubeconfigs (under /etc/kubernetes) and image archives.
func controlPlaneFile(p string) bool {
	return strings.HasPrefix(p, kubeadm.KubernetesDir+"/") || imageFile(p)
}

// etcdFile: what an external etcd host's member runs with: its binaries, unit and certificates.
func etcdFile(p string) bool {
	switch p {
	case kubeadm.EtcdUnit, kubeadm.Binary("etcd"), kubeadm.Binary("etcdctl"), kubeadm.Binary("etcdutl"):
		return true
	}
	return strings.HasPrefix(p, kubeadm.PKIDir+"/etcd/")
}

func imageFile(p string) bool { return strings.HasPrefix(p, kubeadm.ImagesDir+"/") }

// controlPlaneHosts are the inventory's control-plane hosts that are part of the run.
func (u *upgradeRun) controlPlaneHosts(p *plan) []*inventory.Host {
	var out []*inventory.Host
	for _, h := range p.hosts {
		if h.Has(inventory.RoleControlPlane) {
			out = append(out, h)
		}
	}
	return out
}

// kindUpgrade is the kind of an upgrade's journal: its key the target version; done "control-plane/<host>",
// "addons", "kubelets/<host>"; current the hosts being changed (they may be NotReady when a killed run
// resumes).
const kindUpgrade = "upgrade"

// upgradeData is what an upgrade keeps in its journal.
type upgradeData struct {
	From string `json:"from"`
	// Cordoned are the nodes the upgrade cordoned (it uncordons those only).
	Cordoned []string `json:"cordoned,omitempty"`
	// Backup is the etcd snapshot taken before the first change (a resumed run takes none).
	Backup *SnapshotResult `json:"backup,omitempty"`
	// RollingBack: a control-plane node failed and the nodes changed are being put back (upgrade
	// --rollback finishes it; the upgrade does not go on).
	RollingBack bool `json:"rollingBack,omitempty"`
}
