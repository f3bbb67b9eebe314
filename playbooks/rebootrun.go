package playbooks

import (
	"errors"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/reboot"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// RebootOptions tune `clusterctl reboot`.
type RebootOptions struct {
	// MaxUnavailable is how many workers reboot at once (default 1); control-plane and etcd hosts always
	// reboot one at a time.
	MaxUnavailable int
	// IfNeeded reboots only the hosts that say they need it (/run/reboot-required, needs-restarting -r).
	IfNeeded bool
	// DrainTimeout bounds a node's drain (evictions a PodDisruptionBudget refuses are retried until then).
	DrainTimeout time.Duration
	// NodeTimeout bounds a host's return: SSH with a new boot, its Node Ready, its static Pods Ready, etcd
	// healthy on every member.
	NodeTimeout time.Duration
	DryRun      bool
	Now         func() time.Time
}

// RebootResult is what a reboot did, or in a dry run would do.
type RebootResult struct {
	Resumed bool `json:"resumed,omitempty"`
	// Order is the plan, in the order it runs: one line per host.
	Order []string `json:"order"`
	// Rebooted are the hosts rebooted, each with how long it took from the reboot to SSH with a new
	// boot, and to the node Ready (its static Pods and etcd too on a control-plane host) and uncordoned.
	Rebooted []RebootTiming `json:"rebooted"`
	// NotNeeded are the hosts --if-needed left alone: they did not ask for a reboot.
	NotNeeded []string      `json:"notNeeded,omitempty"`
	Phases    []PhaseTiming `json:"phases"`
	Nodes     []NodeStatus  `json:"nodes,omitempty"`
}

// RebootTiming is one host's reboot.
type RebootTiming struct {
	Name string `json:"name"`
	// Needs is why the host asked for it (--if-needed): reboot-required, needs-restarting.
	Needs string `json:"needs,omitempty"`
	// SSHMS is from the reboot command to SSH answering in the new boot; ReadyMS to everything the host
	// runs being Ready again.
	SSHMS   int64 `json:"sshMS"`
	ReadyMS int64 `json:"readyMS"`
}

// ErrRebootRefused is wrapped by the reasons a reboot refuses to start.
var ErrRebootRefused = errors.New("reboot refused")

type rebootRun struct {
	e       *Env
	clients map[string]*apiclient.Client  // clients of control-plane nodes' own API servers, by host
	etcd    map[string]*etcdmember.Client // clients of the etcd members, by host (through its SSH connection)
	o       RebootOptions
	res     *RebootResult
	st      *statedir.Journal[rebootData] // nil in a dry run
	state   map[string]reboot.State       // each host's state before its reboot
	todo    []*inventory.Host             // the run's hosts that reboot, in inventory order
	// notJoined are the inventory's hosts add-node has not joined yet: left out of the checks and waits.
	notJoined map[string]bool
}

// kindReboot is the kind of a reboot's journal: done "reboot/<host>"; current the hosts being rebooted.
const kindReboot = "reboot"

// rebootData is what a reboot keeps in its journal.
type rebootData struct {
	// Cordoned are the nodes the reboot cordoned (it uncordons those only).
	Cordoned []string `json:"cordoned,omitempty"`
	// BootIDs are the boot IDs of the hosts being rebooted, read before their reboot: another one means
	// the reboot happened (a resumed run waits for the host, it does not reboot it again).
	BootIDs map[string]string `json:"bootIDs,omitempty"`
	// Issued is when each host's reboot was asked for (Unix milliseconds).
	Issued map[string]int64 `json:"issued,omitempty"`
}
