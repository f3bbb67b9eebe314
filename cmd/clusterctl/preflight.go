package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/preflight"
)

type preflightOptions struct {
	ssh       sshOptions
	preflight preflightFlags
}

// preflightFlags are the flags of every command that runs preflight (preflight, up, add-node, upgrade).
type preflightFlags struct {
	ignore       []string
	maxClockSkew time.Duration
}

func (o *preflightFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&o.ignore, "ignore-preflight-errors", nil, "preflight checks whose errors are ignored (comma-separated names as the report gives them, or all); a host that cannot be reached is never ignored: the run stops (leave the host out with --limit or the inventory)")
	cmd.Flags().DurationVar(&o.maxClockSkew, "max-clock-skew", 5*time.Second, "clock difference to this workstation above which a host fails preflight")
	allowZero(cmd, "max-clock-skew")
}

func (o *preflightFlags) options() playbooks.PreflightOptions {
	return playbooks.PreflightOptions{Ignore: o.ignore, MaxClockSkew: o.maxClockSkew}
}

func newPreflightCmd(g *globalOptions) *cobra.Command {
	o := &preflightOptions{}
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check every host before building a cluster: kubeadm's preflight checks, and checks across hosts",
		Long: `Connect to every host (--forks at once), gather facts in one round trip per host, and run kubeadm's
preflight checks for each host's role: the first control-plane host gets the "init" set, other
control-plane hosts the "control-plane-join" set, workers the "join" set. Then the checks no
single-node tool can do: duplicate hostnames, MAC addresses, product_uuid or machine-id; clock skew
against this workstation; every node reaching the API server port of the first control-plane host, and
control-plane hosts reaching each other's etcd ports (through short-lived listeners, removed after).

The report is grouped by host, then check. Exit code 0 when only warnings remain, 1 on errors.
Checks are named as kubeadm names them: --ignore-preflight-errors=Port-6443,Swap (or all) turns
their errors into ignored findings.`,
		Example: `  clusterctl preflight -i hosts.yaml
  clusterctl preflight -i hosts.yaml --limit w4,w5 --ignore-preflight-errors=Swap
  clusterctl preflight -i hosts.yaml --output json | jq 'select(.type=="preflight_report")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPreflight(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	o.preflight.addFlags(cmd)
	return cmd
}

func runPreflight(cmd *cobra.Command, g *globalOptions, o *preflightOptions) error {
	view := g.progressView()
	env, done, err := openReading(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer done()
	report, err := playbooks.Preflight(cmd.Context(), env, o.preflight.options())
	if err != nil {
		return failedOnHosts(err)
	}
	if g.Output == "json" {
		if err := writeReport(g.stdout, "preflight_report", statusOf(!report.Failed()), report); err != nil {
			return err
		}
	} else {
		printPreflight(g.stdout, report, true)
	}
	if report.Failed() {
		return &exitError{code: exitFailed, err: errReported}
	}
	return nil
}

// printPreflight prints the report by host; sets labels each host with the check set it got (init, join,
// ...), which says what up would do with it (an upgrade does neither).
func printPreflight(w io.Writer, r *playbooks.PreflightReport, sets bool) {
	var failing []string
	seen := map[string]bool{}
	for _, h := range r.Hosts {
		if sets {
			fmt.Fprintf(w, "%s (%s)\n", h.Name, h.Set)
		} else {
			fmt.Fprintf(w, "%s\n", h.Name)
		}
		if len(h.Findings) == 0 {
			fmt.Fprintln(w, "  all checks passed")
		}
		for _, f := range h.Findings {
			tag := strings.ToUpper(string(f.Severity))
			if f.Ignored {
				tag = "IGNORED"
			} else if f.Severity == preflight.SevError && !seen[f.Check] {
				seen[f.Check] = true
				failing = append(failing, f.Check)
			}
			fmt.Fprintf(w, "  [%s %s] %s\n", tag, f.Check, f.Message)
		}
	}
	fmt.Fprintf(w, "preflight: %d error(s), %d warning(s), %d ignored on %d host(s)\n", r.Errors, r.Warnings, r.Ignored, len(r.Hosts))
	if slices.Contains(failing, preflight.Unignorable) {
		failing = slices.DeleteFunc(failing, func(c string) bool { return c == preflight.Unignorable })
		fmt.Fprintln(w, "a host that cannot be reached cannot be set up: fix the connection (the SSH errors above say what failed), or leave the host out (--limit, or the inventory)")
	}
	if len(failing) > 0 {
		fmt.Fprintf(w, "fix the errors, or to go on anyway: --ignore-preflight-errors=%s\n", strings.Join(failing, ","))
	}
}
