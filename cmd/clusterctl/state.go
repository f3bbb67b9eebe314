package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/backup"
)

func newStateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "state",
		Short:   "The state directory: rebuild it from the cluster's hosts",
		Example: `  clusterctl state pull -i hosts.yaml --state-dir ~/.clusterctl/prod`,
	}
	cmd.AddCommand(newStatePullCmd(g))
	return cmd
}

func newStatePullCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	var from, identity string
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "Rebuild a state directory from the cluster's hosts, to operate the cluster from another workstation",
		Long: `Rebuild the state directory (--state-dir, else .clusterctl/<cluster> beside the inventory; it must be
empty or missing) from the cluster's control-plane and etcd hosts, over SSH: the CAs and their keys
(cluster, front-proxy, etcd, kubelet serving), the service-account key pair, each node's certificates and
kubeconfigs as pushed, the encryption keys, read where kubeadm's layout keeps them. What must be the same
on every control-plane host (the CAs, the keys) is checked to be, and a host that differs is named.
The admin kubeconfig is the control-plane nodes' own (where none is valid, a new one signed by the
pulled CA is made): up would otherwise rewrite theirs with each workstation's in turn. Then up's dry run
renders from the pulled state; its drift (none for a whole state) is reported. Every file is 0600 in a 0700 directory. It says what it
cannot recover (the journal of a run under way elsewhere, the snapshots taken before upgrades).

Afterwards every command works from the new directory: status, certs check-expiration, add-node, upgrade,
certs rotate. --from ARCHIVE takes the state directory from a backup (clusterctl backup; --identity opens
an encrypted one) and reaches no host. Host keys are verified as for every command (known_hosts; --ssh-accept-new records new ones),
and the keys verified are recorded in the new directory's known_hosts, which then trusts the hosts on its
own.`,
		Example: `  clusterctl state pull -i hosts.yaml --state-dir ~/.clusterctl/prod
  clusterctl state pull -i hosts.yaml --from /backups/prod-20261203T170501Z.tar.gz.age --identity ops.key
  clusterctl status -i hosts.yaml --state-dir ~/.clusterctl/prod`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from != "" {
				return statePullFrom(g, from, identity)
			}
			view := g.progressView()
			env, _, err := openEnvNeeding(g, &ssh, view, stateEmpty)
			if err != nil {
				return err
			}
			defer env.Close()
			return change[playbooks.PullResult]{g: g, view: view, result: "state_pull_result",
				play:   func(ctx context.Context) (*playbooks.PullResult, error) { return playbooks.StatePull(ctx, env) },
				report: printPull,
				failed: func(_ *playbooks.PullResult, err error) error {
					// The directory was empty: nothing of the operator's is lost, and a re-run finds it empty.
					clearDir(env.StateDir)
					return failedOnHosts(err)
				},
			}.run(cmd.Context())
		},
	}
	ssh.addFlags(cmd)
	cmd.Flags().StringVar(&from, "from", "", "a backup archive (clusterctl backup) to take the state directory from, instead of the hosts")
	cmd.Flags().StringVar(&identity, "identity", "", "the age identity file that opens an encrypted backup archive (--from)")
	return cmd
}

// statePullFrom fills the empty state directory from a backup archive's: no host is reached.
func statePullFrom(g *globalOptions, file, identity string) error {
	ids, err := backupIdentities(identity)
	if err != nil {
		return err
	}
	if !backup.IsArchive(file) {
		return usageError("--from %s: not a clusterctl backup archive", file)
	}
	inv, state, _, err := loadWithState(g, stateEmpty)
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := backup.Extract(file, ids, "", state)
	if err == nil && m.Cluster != inv.Cluster.Name {
		err = fmt.Errorf("%s is a backup of cluster %q, not of %q", file, m.Cluster, inv.Cluster.Name)
	}
	if err != nil {
		clearDir(state)
		if errors.Is(err, backup.ErrNeedIdentity) {
			return usageError("--from %s: %v", file, err)
		}
		return &exitError{code: exitFailed, err: err}
	}
	if g.Output == "json" {
		return writeReport(g.stdout, "state_pull_result", "ok", struct {
			StateDir string `json:"stateDir"`
			From     string `json:"from"`
			backup.Manifest
		}{state, file, m})
	}
	fmt.Fprintf(g.stdout, "state of cluster %s from %s (taken %s) written into %s in %.1fs: %d file(s)\n", m.Cluster, file,
		m.Created.UTC().Format(time.RFC3339), state, time.Since(start).Seconds(), m.StateFiles)
	return nil
}

// clearDir removes what a failed pull wrote into a directory that was empty.
func clearDir(dir string) {
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func printPull(w io.Writer, r *playbooks.PullResult, took time.Duration) {
	fmt.Fprintf(w, "state pulled into %s from %v in %.1fs: %d file(s), %d encryption key(s), CA %s\n", r.StateDir, r.From, took.Seconds(), r.Files, r.EncryptionKeys, r.CAHash)
	if len(r.Drift) == 0 {
		fmt.Fprintln(w, "up from it would change nothing on any host: the state is whole")
	} else {
		hosts := make([]string, 0, len(r.Drift))
		for h := range r.Drift {
			hosts = append(hosts, h)
		}
		sort.Strings(hosts)
		fmt.Fprintf(w, "up from it would change something on %v: clusterctl diff shows what\n", hosts)
	}
	if len(r.NotJoined) > 0 {
		fmt.Fprintf(w, "not part of the cluster yet (nothing to pull): %v\n", r.NotJoined)
	}
	fmt.Fprintln(w, "not recovered:")
	for _, n := range r.NotRecovered {
		fmt.Fprintf(w, "  %s\n", n)
	}
}
