// Package scripts builds every command clusterctl runs on hosts, from the templates' *.sh files: one
// typed function per script, values quoted by the templates' q and args (transport.ShellQuote) and never
// pasted. Golden files of each, for representative inventories, are in testdata.
package scripts

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/snapshots"
	"github.com/clusterctl/clusterctl/templates"
	"github.com/clusterctl/clusterctl/transport"
)

func render(name string, data any) string {
	out, err := templates.Render(name, data)
	if err != nil {
		// The templates are embedded and their data typed here: a failure is a bug, found by the goldens.
		panic(fmt.Sprintf("script %s: %v", name, err))
	}
	return string(out)
}

// stamps is what every script using the applied-file stamps needs.
type stamps struct {
	Stamps      string
	Dry         bool
	ChangedList string
}

func newStamps(dir string, changed []string, dry bool) stamps {
	list := "\n"
	for _, c := range changed {
		list += c + "\n"
	}
	if dir == "" {
		dir = kubeadm.StampsDir
	}
	return stamps{Stamps: dir, Dry: dry, ChangedList: list}
}

// Image is an image archive on a host and the reference it holds.
//
// Pinned, when set, is the name by digest (registry.k8s.io/pause@sha256:...) the archive also gives the
// image, which the Pods run: the archive is imported again when containerd lacks it.
type Image struct{ File, Ref, Pinned string }

// SetupParams say what Setup applies.
type SetupParams struct {
	// Changed are the files this run writes: what reads them is restarted even if a stamp says otherwise.
	Changed []string
	Images  []Image
	// Runtime are the runtime binaries clusterctl installed (containerd, its shim, runc); with them,
	// containerd's unit is clusterctl's, and containerd restarts when any changes. Empty: the host's own.
	Runtime []string
	Dry     bool
	// Stamps is where the applied-file stamps are kept (kubeadm.StampsDir when empty).
	Stamps string
	// VersionCache is where the components' versions are kept for the facts script (kubeadm.VersionCache
	// when empty), written when its directory exists.
	VersionCache string
	// EtcdUnit: the host runs a member of an external etcd cluster (its unit is enabled, not started:
	// Etcd starts it). EtcdOnly: that is all it runs (no runtime, no kubelet).
	EtcdUnit, EtcdOnly bool
	// NetworkUnits are the pod network's units among a node's files (network.File.Unit); PodRoutes is the
	// routes file of PodRoutesUnit, the pod routes unit among them: when the kernel lacks one of its routes,
	// the unit is restarted.
	NetworkUnits             []string
	PodRoutes, PodRoutesUnit string
	// Networkd is systemd-networkd's drop-in among a node's files (network.File.Networkd), which networkd
	// reads only when it starts: restarted (where it runs) when the drop-in changed. "": none.
	Networkd string
	// Snapshots: the host's files hold the etcd member's scheduled snapshots (its timer is started, and
	// restarted when they change); else a timer of clusterctl's left from an earlier schedule is removed.
	Snapshots bool
	// Partial: the files are some of the node's only (an upgrade's images, its control-plane files), and
	// Snapshots says what the whole node has: a timer of clusterctl's the node's files lack is not removed
	// here. Else an upgrade's first steps stopped the timer and removed its files, until the node's whole
	// push put them back.
	Partial bool
	// PrivateDirs are directories only root may enter (0700): etcd's data, the API server's configuration
	// and audit log, on the hosts that have them.
	PrivateDirs []string
	// EtcdUser is the user and group etcd runs as under profile cis (made when the host has neither;
	// etcd's data directory given to them); nil: root.
	EtcdUser *EtcdUser
}

// Setup applies what a node's files need: kernel modules and settings, units, the runtime (its binaries
// and configuration), image archives not imported yet. It prints "action: WHAT" for each thing it
// does, or in a dry run would do.
func Setup(p SetupParams) string {
	// The pod network's units (the pod routes unit) are written with a node's files: reloaded here with
	// them, not when the routes come (see Routes).
	units := append([]string{kubeadm.KubeletUnit, kubeadm.KubeletDropIn}, p.NetworkUnits...)
	switch {
	case p.EtcdOnly:
		units = []string{kubeadm.EtcdUnit}
		p.PodRoutes, p.PodRoutesUnit, p.Networkd = "", "", "" // not a node: no pod routes
	case p.EtcdUnit:
		units = append(units, kubeadm.EtcdUnit)
	}
	if p.Snapshots {
		units = append(units, snapshots.ServicePath, snapshots.TimerPath)
	}
	containerd := []string{kubeadm.ContainerdConfig}
	if len(p.Runtime) > 0 {
		units = append(units, kubeadm.ContainerdUnit)
		containerd = append(append(containerd, kubeadm.ContainerdUnit), p.Runtime...)
	}
	if p.VersionCache == "" {
		p.VersionCache = kubeadm.VersionCache
	}
	return render("setup.sh", struct {
		stamps
		Images                        []Image
		Units, Containerd             []string
		Modules, Sysctl, VersionCache string
		SysctlBefore                  string
		EtcdUnit, EtcdOnly            bool
		Snapshots, Partial            bool
		SnapshotFiles                 []string
		SnapshotTimer                 string
		PrivateDirs                   []string
		EtcdUser                      *EtcdUser
		EtcdData, EtcdUserMade        string
		PodRoutes, PodRoutesUnit      string
		Networkd                      string
	}{newStamps(p.Stamps, p.Changed, p.Dry), p.Images, units, containerd, kubeadm.ModulesConfig, kubeadm.SysctlConfig, p.VersionCache,
		kubeadm.SysctlBefore, p.EtcdUnit || p.EtcdOnly, p.EtcdOnly, p.Snapshots, p.Partial, snapshots.Paths, snapshots.TimerName, p.PrivateDirs,
		p.EtcdUser, kubeadm.EtcdDataDir, EtcdUserMade, p.PodRoutes, p.PodRoutesUnit, p.Networkd})
}

// EtcdParams are what Etcd needs.
type EtcdParams struct {
	Dry    bool
	Stamps string
	// RestartTimeout bounds a restart's wait for the member to be ready again, in seconds.
	RestartTimeout int
}

// Etcd starts an external etcd member that is not running (without waiting: a new cluster's members must
// all start before any is ready), restarts one whose unit or binary changed since it last started with
// them (waiting until it is ready again, so that members restarted one after another keep quorum), or
// leaves it. It prints "action: start etcd", "action: restart etcd" or "running".
func Etcd(p EtcdParams) string {
	return render("etcd.sh", struct {
		stamps
		Inputs  []string
		Timeout int
	}{newStamps(p.Stamps, nil, p.Dry), []string{kubeadm.EtcdUnit, kubeadm.Binary("etcd")}, p.RestartTimeout})
}

// Kubelet restarts the kubelet when its inputs changed since it last started with them, or restart is set;
// starts it when it is not running; else leaves it. It prints "action: restart kubelet", "action: start
// kubelet" or "running".
func Kubelet(p KubeletParams) string {
	return render("kubelet.sh", struct {
		stamps
		Inputs  []string
		Restart bool
	}{newStamps(p.Stamps, nil, p.Dry), p.Inputs, p.Restart})
}

// KubeletParams say when Kubelet restarts the kubelet.
type KubeletParams struct {
	Inputs       []string
	Restart, Dry bool
	Stamps       string // kubeadm.StampsDir when empty
}

// RoutesParams are what Routes needs of a node's pod routes unit.
type RoutesParams struct {
	// Inputs are the files whose change restarts the unit (the unit, its routes files); RoutesFile is
	// the routes file among them, whose routes the kernel must have (the unit is restarted when it lacks
	// one).
	Inputs     []string
	RoutesFile string
	// Networkd is systemd-networkd's drop-in that keeps it off foreign routes (restarted when it changed;
	// "": none).
	Networkd string
	// Owned is networkd's drop-in of the same routes, linked into the drop-in directory of the .network
	// file of the interface that holds Addr (the node's address), and Hook the script NetworkManager's and
	// ifupdown's hooks link to; "": neither.
	Owned, Hook, Addr string
	Name              string // the unit
	StampsDir         string // kubeadm.StampsDir when empty
}

// Routes restarts the pod routes unit when one of its inputs changed since it last started with them, or
// the kernel lacks one of its routes, reloading systemd only when it does not run the unit as it is on
// disk; restarts systemd-networkd when its drop-in changed; and links networkd's drop-in of the routes and
// the other network managers' hooks where they belong, reloading networkd when they changed.
func Routes(p RoutesParams) string {
	return render("routes.sh", struct {
		stamps
		RoutesParams
	}{newStamps(p.StampsDir, nil, false), p})
}

// NodeState is one line: the kubelet's state and the Pods it runs.
func NodeState() string { return render("node-state.sh", nil) }

// Diagnose prints the kubelet's state and log, and etcd's and the API server's last log lines.
func Diagnose() string { return render("diagnose.sh", nil) }

// PIDs prints the process IDs of the program name (etcd, kube-apiserver), one per line, or nothing.
func PIDs(name string) string { return render("pids.sh", struct{ Name string }{name}) }

// StopStaticPods removes the manifests of the static Pods of components (kubeadm.APIServer, ...) and waits,
// polling every 0.2 s at most tries times, until the kubelet has stopped their programs, then (5 s at
// most) until it has cleaned up their Pods, so that new manifests written next start at once.
//
// keep, when set, is where an upgrade keeps what its writes replace (transport.File.Previous): each
// manifest is kept there before it is removed (as the upload would keep it), so that a rollback finds it.
func StopStaticPods(components []string, tries int, keep string) string {
	var manifests, processes []string
	for _, c := range components {
		manifests = append(manifests, kubeadm.Manifest(c))
		processes = append(processes, ProcessName(c))
	}
	return render("stop-static-pods.sh", struct {
		Manifests, Containers, Processes []string
		PodsDir, Keep, Absent            string
		Tries                            int
	}{manifests, components, processes, kubeadm.KubeletPodsDir, keep, transport.AbsentSuffix, tries})
}

// RestartContainers stops the running containers named name of the Pods of namespace through the
// container runtime (crictl), so that the kubelet starts them again in their Pods, and waits, polling
// every 0.2 s at most tries times, until as many run again. It prints "restarted N", or nothing when
// none ran.
func RestartContainers(namespace, name string, tries int) string {
	return render("restart-containers.sh", struct {
		Namespace, Name string
		Tries           int
	}{namespace, name, tries})
}

// ProcessName is the name the kernel gives a program's process (its first 15 bytes), as pgrep -x matches.
func ProcessName(program string) string {
	if len(program) > 15 {
		return program[:15]
	}
	return program
}

// RemoveFiles removes files, printing "removed" for each that was there.
func RemoveFiles(files ...string) string {
	return render("remove-files.sh", struct{ Files []string }{files})
}

// ReadCert prints the certificates of a PEM file (never its key), or nothing.
func ReadCert(file string) string { return render("read-cert.sh", struct{ File string }{file}) }

// SwitchKubeletClient points kubelet-client-current.pem at file, beside it, and, when restart says so,
// restarts the kubelet.
func SwitchKubeletClient(file string, restart bool) string {
	return render("switch-kubelet-client.sh", struct {
		Dir, File, Link string
		Restart         bool
	}{kubeadm.KubeletPKIDir, file, strings.TrimPrefix(kubeadm.KubeletClientCurrent, kubeadm.KubeletPKIDir+"/"), restart})
}

// RenewServing removes the kubelet's serving pair (file: kubeadm.KubeletServerCurrent) and restarts it: it
// requests a new one.
func RenewServing(file string) string {
	return render("renew-serving.sh", struct{ File string }{file})
}

// PodTokens prints each Pod's service-account token file under podsDir (the kubelet's, kubeadm.KubeletPodsDir) and
// the header of its token.
func PodTokens(podsDir string) string {
	return render("pod-tokens.sh", struct{ PodsDir string }{podsDir})
}

// Certs prints every certificate-bearing file: "== PATH", then its certificates, or a kubeconfig's client
// certificate line.
func Certs() string {
	return render("certs.sh", struct {
		PKIDir             string
		Pairs, Kubeconfigs []string
	}{kubeadm.PKIDir, []string{kubeadm.KubeletClientCurrent, kubeadm.KubeletServerCurrent},
		[]string{kubeadm.AdminKubeconfig, kubeadm.SuperAdminConfig, kubeadm.KubernetesDir + "/controller-manager.conf",
			kubeadm.KubernetesDir + "/scheduler.conf", kubeadm.KubeletKubeconfig}})
}

// FactsParams say what the facts script looks for.
type FactsParams struct {
	Socket                            string // the runtime's socket path
	AskCRI                            bool   // whether to ask the runtime if it answers
	Commands, Files, Dirs, CNIBinDirs []string
	// KernelSettings are kernel settings read, as paths under /proc/sys (vm/overcommit_memory).
	KernelSettings []string
	MemberPath     string
	// CACert is the cluster CA's certificate on a node, read when the host has no membership mark.
	CACert string
	// VersionCache is the setup script's cache of the components' versions (read only).
	VersionCache string
	// Stamp is the host's stamp (Stamp), printed with the state of the files it lists; "": not read.
	Stamp string
	// ConnPorts are TCP ports to which the host's established connections are printed (a connection is
	// proof that the host reaches that address and port).
	ConnPorts []int
}

// Facts prints one fact per line, "key<TAB>value".
func Facts(p FactsParams) string {
	// grep's patterns for the established connections (state 01) to ConnPorts: in /proc/net/tcp{,6} the
	// remote address's port, in hex, comes right before the state.
	var conn []string
	for _, port := range p.ConnPorts {
		if port > 0 && port <= 65535 {
			conn = append(conn, fmt.Sprintf(":%04X 01 ", port))
		}
	}
	return render("facts.sh", struct {
		FactsParams
		ConnGrep []string
	}{p, conn})
}

// NetFacts prints the facts of a host's network alone, as Facts prints them.
func NetFacts() string { return render("netfacts.sh", nil) }

// StampParams are a host's stamp: where it goes, the plan's digest, the files whose state it keeps, the
// pod routes file whose routes the kernel must have ("": none).
type StampParams struct {
	Path, Digest string
	Paths        []string
	Routes       string
}

// Stamp writes a host's stamp (templates/files/stamp.sh).
func Stamp(p StampParams) string {
	return render("stamp.sh", struct{ Path, Digest, Paths, Routes string }{p.Path, p.Digest, strings.Join(p.Paths, "\n"), cmp.Or(p.Routes, "-")})
}

// Listen runs a TCP listener at ip:port for at most a minute.
func Listen(ip string, port int) string {
	return render("listen.sh", struct {
		IP   string
		Port int
	}{ip, port})
}

// ListenWait waits (5 s at most) until port is listening.
func ListenWait(port int) string { return render("listen-wait.sh", struct{ Port int }{port}) }

// Probe connects to ip:port and closes the connection.
func Probe(ip string, port int) string {
	return render("probe.sh", struct {
		IP   string
		Port int
	}{ip, port})
}

// NetworkLeftovers are what reset removes of the pod networks from a host: files, directories (whole),
// network links, CNI networks (the host-local plugin's store and the cached results of each, by the
// network's name) and iptables chains by prefix (FLANNEL-: with the rules of other chains that jump to
// them; KUBE- always). Networkd is systemd-networkd's drop-in of the pod routes unit, restarted without.
// Graceful are containers (by their Kubernetes name) interrupted (SIGINT), and given 10 s, before the
// others are killed: they remove what they made on the host when they stop.
type NetworkLeftovers struct {
	Files, Dirs, Links, Networks, Chains, Graceful []string
	Networkd                                       string
}

// Add is l with m's.
func (l NetworkLeftovers) Add(m NetworkLeftovers) NetworkLeftovers {
	l.Files = append(l.Files, m.Files...)
	l.Dirs = append(l.Dirs, m.Dirs...)
	l.Links = append(l.Links, m.Links...)
	l.Networks = append(l.Networks, m.Networks...)
	l.Chains = append(l.Chains, m.Chains...)
	l.Graceful = append(l.Graceful, m.Graceful...)
	l.Networkd = cmp.Or(l.Networkd, m.Networkd)
	return l
}

// chainPrefixRE is an iptables chain prefix that goes into an awk pattern as it is.
var chainPrefixRE = regexp.MustCompile(`^[A-Z][A-Z0-9]*-$`)

// containerNameRE is a Kubernetes container name, which goes into a ctr filter as it is.
var containerNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// chainPattern is the awk alternation of KUBE- and net's chain prefixes (KUBE-|FLANNEL-); it checks net's
// container names too.
func chainPattern(net NetworkLeftovers) string {
	for _, c := range net.Graceful {
		if !containerNameRE.MatchString(c) {
			panic(fmt.Sprintf("container name %q", c)) // the plugins' constants: a bug, found by the goldens
		}
	}
	out := []string{"KUBE-"}
	for _, c := range net.Chains {
		if !chainPrefixRE.MatchString(c) {
			panic(fmt.Sprintf("chain prefix %q", c)) // the plugins' constants: a bug, found by the goldens
		}
		out = append(out, c)
	}
	return strings.Join(out, "|")
}

// Reset undoes what up made on a host (see playbooks.Reset); binaries are those pushed from an artifacts
// directory, net what the pod networks leave.
// snapshotsDir, when set, is the etcd snapshots' directory: the snapshots in it are removed too (reset
// --remove-snapshots); the schedule's timer and files are removed either way.
func Reset(binaries, runtime []string, backupDir, absentSuffix string, net NetworkLeftovers, snapshotsDir string) string {
	return render("reset.sh", struct {
		Binaries, Runtime    []string
		Backup, Absent       string
		SysctlBefore, Chains string
		Net                  NetworkLeftovers
		Snapshots            resetSnapshots
	}{binaries, runtime, backupDir, absentSuffix, kubeadm.SysctlBefore, chainPattern(net), net, newResetSnapshots(snapshotsDir)})
}

// resetSnapshots is what reset knows of the etcd snapshots' schedule and, with Dir, their directory.
type resetSnapshots struct {
	Files            []string
	Timer, Service   string
	Dir, NamePattern string
}

func newResetSnapshots(dir string) resetSnapshots {
	return resetSnapshots{Files: snapshots.Paths, Timer: snapshots.TimerName, Service: snapshots.ServiceName, Dir: dir,
		NamePattern: snapshots.NameRE.String()}
}

// ResetPlan is Reset's read-only twin: it prints, as "action: " lines, what Reset would undo on the host.
func ResetPlan(binaries, runtime []string, backupDir string, net NetworkLeftovers, snapshotsDir string) string {
	return render("reset-plan.sh", struct {
		Binaries, Runtime    []string
		Backup               string
		SysctlBefore, Chains string
		Net                  NetworkLeftovers
		Snapshots            resetSnapshots
	}{binaries, runtime, backupDir, kubeadm.SysctlBefore, chainPattern(net), net, newResetSnapshots(snapshotsDir)})
}

// EtcdHold is where a restore keeps a node's etcd and control-plane manifests while they must not run.
const EtcdHold = kubeadm.StateDir + "/etcd-restore/held"

// HoldControlPlane moves a node's etcd and control-plane manifests from manifestsDir (kubeadm.ManifestsDir)
// to hold (EtcdHold) and waits (every half second, at most tries times) until none of them runs. It prints
// "held NAME" for each manifest it moved.
func HoldControlPlane(hold, manifestsDir string, tries int) string {
	var manifests []string
	for _, c := range kubeadm.ControlPlaneComponents {
		manifests = append(manifests, path.Join(manifestsDir, c+".yaml"))
	}
	return render("etcd-hold.sh", struct {
		Hold      string
		Manifests []string
		Tries     int
	}{hold, manifests, tries})
}

// ReleaseManifests moves the named held manifests (etcd.yaml, ...) from hold back to manifestsDir,
// printing "released NAME" for each.
func ReleaseManifests(hold, manifestsDir string, names ...string) string {
	return render("etcd-release.sh", struct {
		Hold, Manifests string
		Names           []string
	}{hold, manifestsDir, names})
}

// RestoreCheckParams are what a host needs to take part in a restore: etcdutl, and an etcd manifest (in
// place or held: Manifest, Held) or, when Unit is set, an external member's unit.
type RestoreCheckParams struct {
	Etcdutl, Manifest, Held, Unit string
}

// RestoreCheck prints what a host lacks to take part in a restore, one line each; nothing when it can.
func RestoreCheck(p RestoreCheckParams) string {
	return render("etcd-restore-check.sh", p)
}

// StopEtcdUnit stops an external member for a restore, printing "held etcd" when it was running; StartEtcdUnit
// starts it again without waiting (the members of the restored cluster must all start before any is ready),
// printing "released etcd".
func StopEtcdUnit() string {
	return "set -eu\nif systemctl is-active -q etcd; then systemctl stop etcd; echo 'held etcd'; fi\n"
}

// StartEtcdUnit: see StopEtcdUnit.
func StartEtcdUnit() string {
	return "set -eu\nif ! systemctl is-active -q etcd; then systemctl start --no-block etcd; echo 'released etcd'; fi\n"
}

// EtcdRestoreParams say how a member is restored from a snapshot already on the host.
type EtcdRestoreParams struct {
	Snapshot string
	// Name and PeerURL are the member's; InitialCluster every member's "name=peerURL", Token the new
	// cluster's token (the same on every member).
	Name, PeerURL, InitialCluster, Token string
	// Bump is how far the store's revision jumps: past any revision a client saw before the restore, so
	// that watches resume by listing again (with --mark-compacted) instead of missing changes.
	Bump uint64
	// Etcdutl and DataDir are where etcdutl and the member's data directory are (empty:
	// kubeadm.Binary("etcdutl"), kubeadm.EtcdDataDir).
	Etcdutl, DataDir string
}

// RestoreEtcd restores the member's data directory from the snapshot with etcdutl (kept as
// EtcdDataDir.before-restore the directory it replaces) and removes the snapshot; it prints "restored".
func RestoreEtcd(p EtcdRestoreParams) string {
	data := cmp.Or(p.DataDir, kubeadm.EtcdDataDir)
	return render("etcd-restore.sh", struct {
		EtcdRestoreParams
		Etcdutl, Work, Data, Before string
	}{p, cmp.Or(p.Etcdutl, kubeadm.Binary("etcdutl")), data + ".restoring", data, data + ".before-restore"})
}

// RollbackParams say what Rollback puts back.
type RollbackParams struct {
	// Dir holds what an upgrade phase kept of the node's files (transport.File.Previous).
	Dir string
	// Except is a directory whose kept files stay kept (the caller writes them).
	Except string
	// Runtime are the runtime binaries clusterctl installed (as SetupParams.Runtime): containerd restarts
	// when they, its unit or its configuration changed since it last started.
	Runtime []string
	// Drop removes Dir and does nothing else.
	Drop bool
	Dry  bool
	// Stamps is where the applied-file stamps are kept (kubeadm.StampsDir when empty), ImagesDir the
	// image archives (kubeadm.ImagesDir when empty).
	Stamps, ImagesDir string
}

// Rollback puts back the files an upgrade phase kept on a node, or with Drop forgets them.
func Rollback(p RollbackParams) string {
	containerd := []string{kubeadm.ContainerdConfig}
	if len(p.Runtime) > 0 {
		containerd = append(append(containerd, kubeadm.ContainerdUnit), p.Runtime...)
	}
	if p.ImagesDir == "" {
		p.ImagesDir = kubeadm.ImagesDir
	}
	return render("rollback.sh", struct {
		stamps
		Dir, Except, Absent, Images string
		Containerd                  []string
		Drop                        bool
	}{newStamps(p.Stamps, nil, p.Dry), p.Dir, p.Except, transport.AbsentSuffix, p.ImagesDir, containerd, p.Drop})
}
