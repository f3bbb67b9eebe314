package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/charts"
)

func newDiffCmd(g *globalOptions) *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "What up would change on each host: a unified diff of each managed file, the services and images out of place",
		Long: `Show, for each host, what clusterctl up would change: each managed file that differs from what up would
write, as a unified diff from the host's to clusterctl's (a secret — a file no one but its owner may read,
as keys, kubeconfigs and the encryption configuration — is named, its content never shown; a binary or a
file over 256 KiB is named with its size), the services up would restart and the images it would import,
and the add-ons it would install, upgrade or uninstall; not the hooks up would run. It is up's dry run (the same steps and scripts,
each change recorded instead of made): nothing is changed and no lock is taken.

Exit 0 when nothing differs, 1 when something does (as diff(1) and terraform plan -detailed-exitcode
do, for monitoring and CI), 2 when it could not tell (a host unreachable, a bad inventory).`,
		Example: `  clusterctl diff -i hosts.yaml
  clusterctl diff -i hosts.yaml -o json | jq -r 'select(.type == "file") | "\(.host) \(.path)"'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := openCluster(g, &o.ssh, newEventView(io.Discard, "plain"))
			if err != nil {
				return err
			}
			defer env.Close()
			res, err := playbooks.Up(cmd.Context(), env, playbooks.UpOptions{DryRun: true, Preflight: o.preflight.options()})
			if err != nil {
				if cmd.Context().Err() != nil {
					return cmd.Context().Err()
				}
				if g.Output == "json" {
					_ = writeLast(g.stdout, "diff_result", "failed", err.Error(), nil, nil)
				}
				if errors.Is(err, playbooks.ErrPreflight) && res != nil && res.Preflight != nil {
					printPreflight(g.stderr, res.Preflight, true)
				}
				return &exitError{code: exitUsage, err: fmt.Errorf("could not tell what differs: %w", err)}
			}
			n, err := writeDiff(g, res)
			if err != nil {
				return err
			}
			if n > 0 {
				return &exitError{code: exitFailed, err: errReported}
			}
			return nil
		},
	}
	o.ssh.addFlags(cmd)
	o.preflight.addFlags(cmd)
	return cmd
}

// writeDiff writes what differs, as text or JSON lines, and returns how many changes there are.
func writeDiff(g *globalOptions, res *playbooks.UpResult) (int, error) {
	files, actions, addons := 0, 0, 0
	for _, p := range res.Plan {
		files += len(p.Files)
		actions += len(p.Changes())
	}
	for _, a := range res.Addons {
		if a.Action != charts.Unchanged {
			addons++
		}
	}
	total := files + actions + addons
	if g.Output != "json" {
		printDiff(g.stdout, res)
		fmt.Fprintf(g.stdout, "%d file(s), %d action(s), %d add-on change(s) differ on %d host(s)\n", files, actions, addons, len(res.Plan))
		return total, nil
	}
	type fileLine struct {
		Type string `json:"type"`
		Host string `json:"host"`
		playbooks.PlannedFile
	}
	type actionLine struct {
		Type   string `json:"type"`
		Host   string `json:"host"`
		Action string `json:"action"`
	}
	for _, p := range res.Plan {
		for _, f := range p.Files {
			if err := writeJSONLine(g.stdout, fileLine{"file", p.Host, f}); err != nil {
				return 0, err
			}
		}
		for _, a := range p.Changes() {
			if err := writeJSONLine(g.stdout, actionLine{"action", p.Host, a}); err != nil {
				return 0, err
			}
		}
	}
	for _, a := range res.Addons {
		if a.Action != charts.Unchanged {
			if err := writeJSONLine(g.stdout, struct {
				Type string `json:"type"`
				charts.Change
			}{"addon", a}); err != nil {
				return 0, err
			}
		}
	}
	status := "ok"
	return total, writeReport(g.stdout, "diff_result", status, struct {
		Differs bool `json:"differs"`
		Files   int  `json:"files"`
		Actions int  `json:"actions"`
		Addons  int  `json:"addons"`
		Hosts   int  `json:"hosts"`
	}{total > 0, files, actions, addons, len(res.Plan)})
}

// printDiff prints each host's files (with their diffs) and actions, then the add-ons' changes.
func printDiff(w io.Writer, res *playbooks.UpResult) {
	for _, p := range res.Plan {
		if len(p.Files)+len(p.Changes()) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", p.Host)
		for _, f := range p.Files {
			switch {
			case f.Redacted:
				fmt.Fprintf(w, "  %-8s %s (a secret: content not shown)\n", f.Change, f.Path)
			case f.Diff != "":
				fmt.Fprintf(w, "  %-8s %s\n", f.Change, f.Path)
				for _, l := range strings.Split(strings.TrimSuffix(f.Diff, "\n"), "\n") {
					fmt.Fprintln(w, "    "+l)
				}
			default:
				fmt.Fprintf(w, "  %-8s %s (%d bytes)\n", f.Change, f.Path, f.Size)
			}
		}
		for _, a := range p.Changes() {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
	printAddonChanges(w, res.Addons, true)
}
