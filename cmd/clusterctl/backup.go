package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/backup"
)

func newBackupCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	var out, recipientsFile string
	var recipients []string
	var unencrypted bool
	cmd := &cobra.Command{
		Use:   "backup --out DIR (--recipient AGE_RECIPIENT | --unencrypted)",
		Short: "One archive of a consistent etcd snapshot and the state directory, encrypted to an age recipient",
		Long: `Write one archive into --out holding what it takes to bring the cluster back: a consistent etcd snapshot
(streamed from a healthy member to the workstation, as etcd snapshot does) and the state directory — its CA
keys included. It holds the cluster's keys: it is encrypted to the age recipients given (--recipient
age1..., --recipients-file: age's format, one per line), and written plain only with --unencrypted. The
file is <cluster>-<UTC time>.tar.gz.age (or .tar.gz), 0600.

etcd restore --from ARCHIVE restores its snapshot, and state pull --from ARCHIVE rebuilds a state
directory from it (both with --identity FILE, an age identity, for an encrypted one). The scheduled
snapshots of cluster.etcd.snapshots stay on the etcd hosts and hold no keys: this is the backup to take
off the cluster (a cron job, CI). Nothing is changed and no lock is taken.`,
		Example: `  age-keygen -o ops.key   # once; keep ops.key away from the backups
  clusterctl backup -i hosts.yaml --out /backups --recipient age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p
  clusterctl etcd restore -i hosts.yaml --from /backups/prod-20261203T170501Z.tar.gz.age --identity ops.key`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := backupRecipients(recipients, recipientsFile, unencrypted)
			if err != nil {
				return err
			}
			if out == "" {
				return usageError("--out DIR is required: the directory the archive is written into")
			}
			if err := outDir(out); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			view := g.progressView()
			env, err := openCluster(g, &ssh, view)
			if err != nil {
				return err
			}
			defer env.Close()
			return change[playbooks.BackupResult]{g: g, view: view, result: "backup_result",
				play: func(ctx context.Context) (*playbooks.BackupResult, error) {
					return playbooks.Backup(ctx, env, playbooks.BackupOptions{Out: out, Recipients: rs, Version: version})
				},
				report: func(w io.Writer, r *playbooks.BackupResult, took time.Duration) {
					how := "encrypted to " + plural(len(rs)) + " recipient(s)"
					if !r.Encrypted {
						how = "NOT encrypted: it holds the cluster's CA keys"
					}
					fmt.Fprintf(w, "backup %s (%s, %s) in %.1fs: etcd at revision %d from %s, %d file(s) of the state directory\n",
						r.File, formatSize(r.Size), how, took.Seconds(), r.Revision, r.Host, r.StateFiles)
				},
			}.run(cmd.Context())
		},
	}
	ssh.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "the directory the archive is written into (made 0700 when missing)")
	f.StringSliceVar(&recipients, "recipient", nil, "an age recipient (age1...) the archive is encrypted to (repeatable)")
	f.StringVar(&recipientsFile, "recipients-file", "", "a file of age recipients, one per line (# comments)")
	f.BoolVar(&unencrypted, "unencrypted", false, "write the archive plain (it holds the cluster's CA keys)")
	return cmd
}

// backupRecipients reads --recipient and --recipients-file; none is refused unless --unencrypted.
func backupRecipients(list []string, file string, unencrypted bool) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, s := range list {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(s))
		if err != nil {
			return nil, usageError("--recipient %q: %v", s, err)
		}
		out = append(out, r)
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, usageError("--recipients-file: %v", err)
		}
		defer f.Close()
		rs, err := age.ParseRecipients(io.LimitReader(f, 1<<20))
		if err != nil {
			return nil, usageError("--recipients-file %s: %v", file, err)
		}
		out = append(out, rs...)
	}
	switch {
	case len(out) > 0 && unencrypted:
		return nil, usageError("--unencrypted and a recipient: choose one")
	case len(out) == 0 && !unencrypted:
		return nil, usageError("a backup holds the cluster's CA keys: encrypt it to an age recipient (--recipient age1..., --recipients-file FILE; age-keygen makes one), or pass --unencrypted")
	}
	return out, nil
}

// backupIdentities reads --identity: an age identity file; none when not given.
func backupIdentities(file string) ([]age.Identity, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, usageError("--identity: %v", err)
	}
	defer f.Close()
	ids, err := age.ParseIdentities(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, usageError("--identity %s: %v", file, err)
	}
	return ids, nil
}

// snapshotFromBackup extracts a backup archive's snapshot into the state directory's snapshots/ (0700),
// named after the archive: a re-run (an interrupted restore) uses the one extracted before.
func snapshotFromBackup(state, file, identity string) (string, error) {
	ids, err := backupIdentities(identity)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(state, "snapshots")
	if err := outDir(dir); err != nil {
		return "", &exitError{code: exitUsage, err: err}
	}
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".age"), ".tar.gz") + ".db"
	dst := filepath.Join(dir, name)
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	part := dst + ".part"
	_ = os.Remove(part)
	if _, err := backup.Extract(file, ids, part, ""); err != nil {
		_ = os.Remove(part)
		if errors.Is(err, backup.ErrNeedIdentity) {
			return "", usageError("--from %s: %v", file, err)
		}
		return "", &exitError{code: exitFailed, err: err}
	}
	return dst, os.Rename(part, dst)
}
