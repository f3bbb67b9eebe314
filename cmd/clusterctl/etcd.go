package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/backup"
	"github.com/clusterctl/clusterctl/tasks/snapshots"
)

func newEtcdCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "The cluster's etcd: member status, snapshots to the workstation, disaster recovery from one",
		Example: `  clusterctl etcd status -i hosts.yaml
  clusterctl etcd snapshot -i hosts.yaml --out backup.db
  clusterctl etcd restore -i hosts.yaml --from backup.db`,
	}
	cmd.AddCommand(newEtcdStatusCmd(g), newEtcdSnapshotCmd(g), newEtcdSnapshotsCmd(g), newEtcdRestoreCmd(g))
	return cmd
}

func newEtcdSnapshotsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "The snapshots etcd members take on the schedule of cluster.etcd.snapshots",
		Example: `  clusterctl etcd snapshots list -i hosts.yaml
  clusterctl etcd restore -i hosts.yaml --from cp1:latest`,
	}
	cmd.AddCommand(newEtcdSnapshotsListCmd(g))
	return cmd
}

func newEtcdSnapshotsListCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Every etcd host's scheduled snapshots, newest first, and its schedule's state",
		Long: `List, on every etcd host (the control-plane hosts, when etcd is stacked on them), the snapshots its member
took on the schedule of cluster.etcd.snapshots (in its dir, default /var/lib/etcd-snapshots: each a file
etcd-snapshot-<UTC time>.db, verified with etcdutl before it took that name), newest first, with their
size and time; and the schedule's state there: its timer, when it fires next, and how its last run
ended. etcd restore --from HOST:latest (or HOST:NAME) restores one.

Exit 0 when every host was read and every schedule's last run succeeded; 1 otherwise (for monitoring).`,
		Example: `  clusterctl etcd snapshots list -i hosts.yaml
  clusterctl etcd snapshots list -i hosts.yaml -o json | jq -r '.members[] | "\(.host) \(.snapshots[0].name)"'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := openCluster(g, &ssh, newEventView(io.Discard, "plain"))
			if err != nil {
				return err
			}
			defer env.Close()
			members, err := playbooks.EtcdSnapshots(cmd.Context(), env)
			bad := 0
			for _, m := range members {
				if !m.NotJoined && (m.Error != "" || m.LastResult != "" && m.LastResult != "success") {
					bad++
				}
			}
			if g.Output == "json" {
				if werr := writeReport(g.stdout, "etcd_snapshots", statusOf(err == nil && bad == 0), struct {
					Members []playbooks.MemberSnapshots `json:"members"`
				}{members}); werr != nil {
					return werr
				}
			} else {
				printSnapshots(g.stdout, members)
			}
			if err != nil {
				return failedOnHosts(err)
			}
			if bad > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d etcd hosts unread or with a failed snapshot run", bad, len(members))}
			}
			return nil
		},
	}
	ssh.addFlags(cmd)
	return cmd
}

func printSnapshots(w io.Writer, members []playbooks.MemberSnapshots) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tSNAPSHOT\tSIZE\tTAKEN (UTC)")
	for _, m := range members {
		for _, s := range m.Snapshots {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Host, s.Name, formatSize(s.Size), s.Taken.Format("2006-01-02 15:04:05"))
		}
	}
	tw.Flush()
	for _, m := range members {
		switch {
		case m.NotJoined:
			fmt.Fprintf(w, "%s: %s\n", m.Host, m.Error)
		case m.Error != "":
			fmt.Fprintf(w, "%s: not read: %s\n", m.Host, m.Error)
		case m.Timer == "":
			fmt.Fprintf(w, "%s: no schedule (cluster.etcd.snapshots), %d snapshots\n", m.Host, len(m.Snapshots))
		default:
			last := "never ran"
			if m.LastRun != "" {
				last = "last run " + m.LastResult + " at " + m.LastRun
			}
			fmt.Fprintf(w, "%s: schedule %s, next %s, %s\n", m.Host, m.Timer, m.Next, last)
		}
	}
}

func newEtcdStatusCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Members, leader, learners, database size, revision and health of every etcd member",
		Long: `Ask every etcd host's member (the control-plane hosts', when etcd is stacked on them), through that
host's own SSH connection, for its status (version, leader, learner, database size and the part in use,
revision, raft term and index) and its health (a linearizable read, as etcdctl endpoint health does, and
the member's alarms), and the cluster for its member list. Members on no inventory host and inventory hosts that are not members are listed too.

Exit 0 when every member is a started, healthy member; 1 otherwise (for monitoring).`,
		Example: `  clusterctl etcd status -i hosts.yaml
  clusterctl etcd status -i hosts.yaml -o json | jq '.members[] | select(.status.healthy | not)'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			view := newEventView(io.Discard, "plain")
			env, err := openCluster(g, &ssh, view)
			if err != nil {
				return err
			}
			defer env.Close()
			members, err := playbooks.EtcdStatus(cmd.Context(), env)
			unhealthy := 0
			for _, m := range members {
				if !m.NotJoined && (!m.IsMember() || !m.Started || m.Status == nil || !m.Status.Healthy) {
					unhealthy++
				}
			}
			if g.Output == "json" {
				if werr := writeReport(g.stdout, "etcd_status", statusOf(err == nil && unhealthy == 0), struct {
					Members   []playbooks.EtcdMember `json:"members"`
					Unhealthy int                    `json:"unhealthy"`
				}{members, unhealthy}); werr != nil {
					return werr
				}
			} else {
				printEtcdStatus(g.stdout, members)
			}
			if err != nil {
				return failedOnHosts(err)
			}
			if unhealthy > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d etcd members not healthy", unhealthy, len(members))}
			}
			return nil
		},
	}
	ssh.addFlags(cmd)
	return cmd
}

func printEtcdStatus(w io.Writer, members []playbooks.EtcdMember) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tMEMBER\tID\tROLE\tVERSION\tDB SIZE\tIN USE\tREVISION\tRAFT TERM\tRAFT INDEX\tHEALTH")
	for _, m := range members {
		host := m.Host
		if host == "" {
			host = "-"
		}
		if m.Status == nil {
			why := m.Error
			if !m.Started && m.IsMember() {
				why = "added, not started; " + why
			}
			if !m.NotJoined {
				why = "unhealthy: " + why
			}
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\t\t%s\n", host, m.Name, why)
			continue
		}
		s := m.Status
		role := "follower"
		switch {
		case s.Learner:
			role = "learner"
		case s.Leader:
			role = "leader"
		}
		health := "healthy"
		if !s.Healthy {
			health = "unhealthy: " + strings.Join(s.Errors, "; ")
		}
		if m.Error != "" {
			health += " (" + m.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", host, m.Name, s.IDHex, role, s.Version,
			formatSize(s.DBSize), formatSize(s.DBSizeInUse), s.Revision, s.RaftTerm, s.RaftIndex, health)
	}
	tw.Flush()
}

func newEtcdSnapshotCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	var out string
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Stream a consistent etcd snapshot to the workstation (nothing is left on the host)",
		Long: `Take a point-in-time snapshot of the cluster's etcd from a healthy voting member (a follower when there
is one) and stream it to the workstation through that host's SSH connection: nothing is written on the
host. The file is written 0600 (as FILE.part, synced, then renamed), its integrity hash (the SHA-256 etcd
appends) checked; its path, size, SHA-256, revision and etcd version are printed. An existing FILE is
refused. --out names the file, or a directory to write etcd-<cluster>-<UTC time>.db into (default: the
state directory's snapshots/, made 0700). The snapshot holds every Secret of the cluster: keep it as you
keep the state directory's keys.`,
		Example: `  clusterctl etcd snapshot -i hosts.yaml
  clusterctl etcd snapshot -i hosts.yaml --out /backups/etcd-$(date +%F).db
  clusterctl etcd snapshot -i hosts.yaml --out /backups -o json | jq -r .file`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			view := g.progressView()
			env, err := openCluster(g, &ssh, view)
			if err != nil {
				return err
			}
			defer env.Close()
			file := out
			if st, err := os.Stat(out); out == "" || err == nil && st.IsDir() {
				dir := out
				if dir == "" {
					dir = filepath.Join(env.StateDir, "snapshots")
				}
				if err := outDir(dir); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				file = filepath.Join(dir, fmt.Sprintf("etcd-%s-%s.db", env.Inv.Cluster.Name, time.Now().UTC().Format("20060102T150405Z")))
			} else if err == nil {
				return usageError("--out %s exists: choose another file", out)
			}
			return change[playbooks.SnapshotResult]{g: g, view: view, result: "etcd_snapshot",
				play: func(ctx context.Context) (*playbooks.SnapshotResult, error) {
					return playbooks.EtcdSnapshot(ctx, env, file)
				},
				report: func(w io.Writer, res *playbooks.SnapshotResult, took time.Duration) {
					fmt.Fprintf(w, "snapshot %s from %s in %.1fs\n  size %s (%d bytes), sha256 %s\n  revision %d, etcd %s\n",
						res.File, res.Host, took.Seconds(), formatSize(res.Size), res.Size, res.SHA256, res.Revision, res.Version)
				},
			}.run(cmd.Context())
		},
	}
	ssh.addFlags(cmd)
	cmd.Flags().StringVar(&out, "out", "", "the snapshot file, or a directory to write it into (default: the state directory's snapshots/)")
	return cmd
}

// printRestore prints what a restore did, or in a dry run the plan.
func printRestore(w io.Writer, res *playbooks.RestoreResult, dryRun bool, took time.Duration) {
	if dryRun {
		fmt.Fprintf(w, "snapshot %s (sha256 %s, revision %d) can be restored onto %s; a restore would:\n", res.Snapshot, res.SHA256, res.Revision, strings.Join(res.Members, ", "))
		for i, line := range res.Plan {
			fmt.Fprintf(w, "  %d. %s\n", i+1, line)
		}
		fmt.Fprintln(w, "dry run: nothing was changed")
		return
	}
	fmt.Fprintf(w, "restored etcd from %s on %s in %.1fs\n", res.Snapshot, strings.Join(res.Members, ", "), took.Seconds())
	for _, n := range res.Nodes {
		ready := "Ready"
		if !n.Ready {
			ready = "NotReady"
		}
		fmt.Fprintf(w, "  %-20s %-8s %s\n", n.Name, ready, n.Version)
	}
}

func newEtcdRestoreCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	var from, identity string
	var assumeYes, dryRun bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "restore --from FILE|HOST:latest",
		Short: "Disaster recovery: a new etcd cluster of the etcd hosts, restored from a snapshot",
		Long: `Replace the cluster's etcd with a new etcd cluster restored from a snapshot, on every etcd host of the
inventory (its control-plane hosts, when etcd is stacked on them):

  1. the snapshot's integrity hash is checked, every etcd and control-plane host reached;
  2. etcd, the API server, controller-manager and scheduler are stopped on every host (static Pods'
     manifests held in /var/lib/clusterctl/etcd-restore/held; external members' units stopped);
  3. the snapshot is pushed (0600) to each, each member's data directory restored from it with etcdutl
     (a new cluster of exactly these members; the store's revision moved a billion past the snapshot's
     and marked compacted, so every watch client lists again), the old one kept as
     /var/lib/etcd.before-restore, the snapshot removed;
  4. etcd is started and quorum awaited, then the control plane, and each API server awaited.

--from a backup archive (clusterctl backup) takes its snapshot, extracted into the state directory's
snapshots/ (--identity opens an encrypted one). --from HOST:latest (or HOST:NAME) takes a scheduled snapshot of an etcd host (cluster.etcd.snapshots;
etcd snapshots list shows them): it is first copied into the state directory's snapshots/ (kept there;
a re-run uses it again). Everything written to the cluster after the snapshot is lost. Hosts that are lost are left out of the
inventory: restore onto the others, then add them back with add-node. An interrupted restore is resumed
by running the same command again. --dry-run checks the snapshot and every host (steps 1 and the checks
of 2) and prints the plan; nothing is stopped or written.`,
		Example: `  clusterctl etcd restore -i hosts.yaml --from backup.db --dry-run
  clusterctl etcd restore -i hosts.yaml --from backup.db
  clusterctl etcd restore -i survivors.yaml --from backup.db --yes && clusterctl add-node -i hosts.yaml cp2 cp3
  clusterctl etcd restore -i hosts.yaml --from cp1:latest`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, name, scheduled, err := checkRestoreFrom(g, from)
			if err != nil {
				return err
			}
			view := g.progressView()
			env, err := openCluster(g, &ssh, view)
			if err != nil {
				return err
			}
			defer env.Close()
			if from, err = restoreSnapshot(cmd.Context(), env, from, host, name, scheduled, identity); err != nil {
				return err
			}
			var cps []string
			for _, h := range env.Inv.ControlPlanes() {
				cps = append(cps, h.Name)
			}
			return change[playbooks.RestoreResult]{g: g, view: view, result: "etcd_restore", lock: mutating(cmd, g, env, dryRun),
				ask: &question{what: "restore stops the control plane and replaces etcd's data: everything written after the snapshot is lost",
					ask:  fmt.Sprintf("restore cluster %q's etcd on %s from %s? [y/N] ", env.Inv.Cluster.Name, strings.Join(cps, ", "), from),
					skip: assumeYes || dryRun},
				play: func(ctx context.Context) (*playbooks.RestoreResult, error) {
					return playbooks.EtcdRestore(ctx, env, playbooks.RestoreOptions{From: from, Timeout: timeout, DryRun: dryRun})
				},
				report: func(w io.Writer, res *playbooks.RestoreResult, took time.Duration) {
					printRestore(w, res, dryRun, took)
				},
			}.run(cmd.Context())
		},
	}
	ssh.addFlags(cmd)
	cmd.Flags().StringVar(&from, "from", "", "the snapshot: a file (from clusterctl etcd snapshot or etcdctl snapshot save), a clusterctl backup archive, or HOST:latest or HOST:NAME, a scheduled snapshot of an etcd host (cluster.etcd.snapshots), fetched first")
	cmd.Flags().StringVar(&identity, "identity", "", "the age identity file that opens an encrypted backup archive (--from)")
	cmd.Flags().BoolVar(&assumeYes, "yes", false, "do not ask for confirmation")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the snapshot and every host, print what a restore would do; change nothing")
	cmd.Flags().DurationVar(&timeout, "node-timeout", 5*time.Minute, "how long each wait may take (the members to stop, quorum, each API server)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "")
	_ = cmd.Flags().MarkDeprecated("timeout", "use --node-timeout, as every command does")
	return cmd
}

// restoreSnapshot is the snapshot file a restore reads, fetched or extracted first into the state
// directory's snapshots/ (0700) before anything is asked or stopped: a scheduled one from its host, a
// backup archive's; a snapshot file as it is.
func restoreSnapshot(ctx context.Context, env *playbooks.Env, from, host, name string, scheduled bool, identity string) (string, error) {
	if backup.IsArchive(from) {
		return snapshotFromBackup(env.StateDir, from, identity)
	}
	if !scheduled {
		return from, nil
	}
	dir := filepath.Join(env.StateDir, "snapshots")
	if err := outDir(dir); err != nil {
		return "", &exitError{code: exitUsage, err: err}
	}
	file, err := playbooks.FetchSnapshot(ctx, env, host, name, dir)
	if err != nil {
		return "", failedOnHosts(err)
	}
	return file, nil
}

// checkRestoreFrom reads restore's --from: a scheduled snapshot of an etcd host of the inventory, or a
// snapshot file that exists.
func checkRestoreFrom(g *globalOptions, from string) (host, name string, scheduled bool, err error) {
	if from == "" {
		return "", "", false, usageError("--from FILE or HOST:latest is required: the snapshot to restore (clusterctl etcd snapshot makes one; clusterctl etcd snapshots list shows the scheduled ones)")
	}
	host, name, scheduled = scheduledSnapshot(from)
	if scheduled {
		inv, _, err := g.loadInventory()
		if err != nil {
			return "", "", false, err
		}
		if h := inv.Host(host); h == nil || !slices.Contains(inv.EtcdHosts(), h) {
			return "", "", false, usageError("--from %s: %s is not an etcd host of the inventory (nor is %s a file)", from, host, from)
		}
	} else {
		if st, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
			return "", "", false, usageError("--from %s: no such file: give a snapshot file (clusterctl etcd snapshot -i FILE makes one), or HOST:latest for a scheduled one", from)
		} else if err != nil {
			return "", "", false, usageError("--from %s: %v", from, errors.Unwrap(err))
		} else if !st.Mode().IsRegular() {
			return "", "", false, usageError("--from %s: not a regular file", from)
		}
	}
	return host, name, scheduled, nil
}

// scheduledSnapshot reads --from as HOST:latest or HOST:NAME (a scheduled snapshot's name); a path that
// exists as a file is a file, whatever it looks like.
func scheduledSnapshot(from string) (host, name string, ok bool) {
	if _, err := os.Stat(from); err == nil {
		return "", "", false
	}
	host, name, ok = strings.Cut(from, ":")
	if !ok || host == "" || strings.ContainsAny(host, "/\\") || (name != "latest" && !snapshots.NameRE.MatchString(name)) {
		return "", "", false
	}
	return host, name, true
}
