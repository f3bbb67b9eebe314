package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
)

func newEncryptionCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "encryption",
		Short: "Encryption at rest: what etcd holds under which key, and the key's rotation",
		Long: `The API servers encrypt Secrets (and cluster.security.encryption.resources) in etcd with secretbox and
a 32-byte key clusterctl keeps in the state directory (encryption-keys.json, 0600) and puts on
control-plane nodes only (/etc/kubernetes/apiserver/encryption-config.yaml, 0600 in a 0700 directory).`,
		Example: "  clusterctl encryption status -i hosts.yaml\n  clusterctl encryption rotate -i hosts.yaml --yes",
	}
	cmd.AddCommand(newEncryptionStatusCmd(g), newEncryptionRotateCmd(g))
	return cmd
}

func newEncryptionStatusCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The state directory's keys, and how many objects etcd holds under each, or in clear",
		Long: `Read etcd (through the first control-plane host's SSH connection, as its API server does) and count,
for each encrypted resource, the objects stored under each key, in clear (written before encryption was
on) or by another provider. Values are read a page at a time; only their prefix is kept; no key or
Secret is printed.

Exit 0 when every object is under the write key and no rotation is under way; 1 otherwise (clusterctl up
stores the stragglers again, clusterctl encryption rotate finishes a rotation).`,
		Example: `  clusterctl encryption status -i hosts.yaml
  clusterctl encryption status -i hosts.yaml -o json | jq '.resources[] | select(.byKey["(clear)"] > 0)'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := openCluster(g, &ssh, newEventView(io.Discard, "plain"))
			if err != nil {
				return err
			}
			defer env.Close()
			st, err := playbooks.EncryptionState(cmd.Context(), env)
			if err != nil {
				return failedOnHosts(err)
			}
			if g.Output == "json" {
				if err := writeReport(g.stdout, "encryption_status", statusOf(st.Stale == 0 && len(st.Keys) <= 1), st); err != nil {
					return err
				}
			} else {
				printEncryptionStatus(g.stdout, st)
			}
			switch {
			case st.Stale > 0:
				return &exitError{code: exitFailed, err: fmt.Errorf("%d object(s) not under the write key %s", st.Stale, st.Keys[0].Name)}
			case len(st.Keys) > 1:
				return &exitError{code: exitFailed, err: fmt.Errorf("a key rotation is under way (%d keys): clusterctl encryption rotate finishes it", len(st.Keys))}
			}
			return nil
		},
	}
	ssh.addFlags(cmd)
	return cmd
}

func printEncryptionStatus(w io.Writer, st *playbooks.EncryptionStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tCREATED\tUSE")
	for _, k := range st.Keys {
		use := "decrypt"
		if k.Write {
			use = "encrypt, decrypt"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Name, k.Created.UTC().Format(time.RFC3339), use)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "RESOURCE\tOBJECTS\tSTORED UNDER")
	for _, r := range st.Resources {
		under := r.Keys()
		if under == "" {
			under = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Resource, r.Objects, under)
	}
	tw.Flush()
}

type encryptionRotateOptions struct {
	ssh     sshOptions
	yes     bool
	dryRun  bool
	timeout time.Duration
}

func newEncryptionRotateCmd(g *globalOptions) *cobra.Command {
	o := &encryptionRotateOptions{}
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Replace the encryption key without downtime, store every object again under the new one",
		Long: `Make a new encryption key in the state directory and move the cluster to it in stages, each applied to
every control-plane node one at a time (its API server restarted with the new configuration and ready
before the next node), each recorded in the state directory before it is applied, so that an
interrupted run is finished by running it again:

  read     the new key is added after the current one: every API server can decrypt with it (skipped
           with one control-plane node)
  write    the new key comes first: every API server encrypts with it
  rewrite  every object of the encrypted resources not under the new key is stored again, and etcd is
           read to check that none is left under another
  retire   the old key leaves the configuration (kept if etcd still holds anything under it)

--dry-run prints the stages a run would apply (an interrupted rotation resumes where it stopped) and how
many objects it would store again; nothing changes on the hosts or in the state directory.

Back up etcd before (clusterctl etcd snapshot): a snapshot taken before holds objects under the old
key, which only the old key decrypts; keep the old encryption-keys.json with it.`,
		Example: `  clusterctl encryption rotate -i hosts.yaml --dry-run
  clusterctl encryption rotate -i hosts.yaml
  clusterctl encryption rotate -i hosts.yaml --yes -o json | jq 'select(.type=="encryption_rotate_result")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			view := g.progressView()
			env, err := openCluster(g, &o.ssh, view)
			if err != nil {
				return err
			}
			defer env.Close()
			if o.dryRun {
				return dryEncryptionRotate(cmd, g, o, env, view)
			}
			return change[playbooks.EncryptionRotateResult]{g: g, view: view, result: "encryption_rotate_result", lock: mutating(cmd, g, env, false),
				ask: &question{what: "encryption rotate restarts the API server on each control-plane node in turn, two or three times, and stores every encrypted object again",
					ask: fmt.Sprintf("rotate the encryption key of cluster %q? [y/N] ", env.Inv.Cluster.Name), skip: o.yes},
				play: func(ctx context.Context) (*playbooks.EncryptionRotateResult, error) {
					return playbooks.RotateEncryption(ctx, env, playbooks.EncryptionRotateOptions{Timeout: o.timeout})
				},
				report: func(w io.Writer, res *playbooks.EncryptionRotateResult, took time.Duration) {
					if res.Resumed {
						fmt.Fprintln(w, "finished the rotation an earlier run began")
					}
					for _, s := range res.Stages {
						fmt.Fprintf(w, "%s: %.1fs\n", s.Name, float64(s.DurationMS)/1000)
					}
					fmt.Fprintf(w, "%d object(s) stored again under %s; retired %s (%.0fs)\n", res.Rewritten, res.New, strings.Join(res.Old, ", "), took.Seconds())
				},
			}.run(cmd.Context())
		},
	}
	o.ssh.addFlags(cmd)
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the stages a run would apply and how many objects it would store again; change nothing")
	cmd.Flags().DurationVar(&o.timeout, "node-timeout", 5*time.Minute, "how long each node's static Pods may take to come back ready")
	return cmd
}

// dryEncryptionRotate prints what encryption rotate would do.
func dryEncryptionRotate(cmd *cobra.Command, g *globalOptions, o *encryptionRotateOptions, env *playbooks.Env, view *eventView) error {
	return change[playbooks.EncryptionRotateResult]{g: g, view: view, result: "encryption_rotate_plan",
		play: func(ctx context.Context) (*playbooks.EncryptionRotateResult, error) {
			return playbooks.RotateEncryption(ctx, env, playbooks.EncryptionRotateOptions{Timeout: o.timeout, DryRun: true})
		},
		report: func(w io.Writer, res *playbooks.EncryptionRotateResult, _ time.Duration) {
			if res.Resumed {
				fmt.Fprintf(w, "would finish the rotation to %s an earlier run began\n", res.New)
			} else {
				fmt.Fprintln(w, "would make a new key")
			}
			for _, s := range res.Plan {
				if s.Skip != "" {
					fmt.Fprintf(w, "  %-8s skipped: %s\n", s.Name, s.Skip)
				} else {
					fmt.Fprintf(w, "  %s\n", s.Name)
				}
			}
			fmt.Fprintf(w, "dry run: %d object(s) would be stored again; would retire %s; nothing was changed\n", res.Rewritten, strings.Join(res.Old, ", "))
		},
	}.run(cmd.Context())
}
