package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/certs"
)

func newStatusCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One report of the whole cluster: Nodes, control plane, etcd, add-ons, certificates, CSRs, the lock",
		Long: `Report how the cluster is, read through the first control-plane host's SSH connection and every etcd
host's: each Node (Ready, roles, the versions of its kubelet, runtime and kernel, cordoned), each
control-plane component's static Pod per node (Ready, version, restarts), each etcd member (leader,
version, health), the add-ons clusterctl installed, the state directory's certificate that expires first,
pending certificate signing requests, the run that holds the cluster's lock, if any, and how many changes
up would make per host (its dry run: clusterctl diff shows them). Each question of the API server is
bounded (5 s); what does not answer is reported, not waited for. Nothing is changed and no lock is taken.

Problems (a Node or component not Ready, an etcd member unhealthy or silent, an add-on not deployed, an
expired certificate, an API server that does not answer) make exit 1; warnings (a certificate within 30
days of expiry, pending CSRs, cordoned Nodes, hosts not joined yet, drift) are said. With -o json: one object per
line, each with its type (node, component, etcd_member, addon, certificate, lock), the last the report's
status, problems and warnings (for monitoring).`,
		Example: `  clusterctl status -i hosts.yaml
  clusterctl status -i hosts.yaml -o json | jq -c 'select(.type == "node" and (.ready | not))'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := openCluster(g, &ssh, newEventView(io.Discard, "plain"))
			if err != nil {
				return err
			}
			defer env.Close()
			s := playbooks.Status(cmd.Context(), env)
			if err := cmd.Context().Err(); err != nil {
				return err
			}
			if g.Output == "json" {
				if err := writeStatusJSON(g.stdout, s); err != nil {
					return err
				}
			} else {
				printStatus(g.stdout, env.Inv.Cluster.Name, s)
			}
			if !s.Healthy() {
				return &exitError{code: exitFailed, err: errReported}
			}
			return nil
		},
	}
	ssh.addFlags(cmd)
	return cmd
}

// writeStatusJSON writes the report as JSON lines: one per object, then the report's status.
func writeStatusJSON(w io.Writer, s *playbooks.ClusterStatus) error {
	var lines [][]byte
	add := func(typ string, v any) {
		body, _ := json.Marshal(v)
		line := []byte(`{"type":` + strconv.Quote(typ))
		if len(body) > 2 {
			line = append(line, ',')
		}
		line = append(line, body[1:]...)
		lines = append(lines, append(line, '\n'))
	}
	for _, n := range s.Nodes {
		add("node", n)
	}
	for _, c := range s.Components {
		add("component", c)
	}
	for _, m := range s.Etcd {
		add("etcd_member", m)
	}
	for _, a := range s.Addons {
		add("addon", a)
	}
	if s.Soonest != nil {
		add("certificate", s.Soonest)
	}
	if s.Lock != nil {
		add("lock", s.Lock)
	}
	for _, l := range lines {
		if _, err := w.Write(l); err != nil {
			return err
		}
	}
	return writeReport(w, "cluster_status", statusOf(s.Healthy()), struct {
		Healthy     bool           `json:"healthy"`
		Nodes       int            `json:"nodes"`
		PendingCSRs []string       `json:"pendingCSRs"`
		Drift       map[string]int `json:"drift"`
		Problems    []string       `json:"problems"`
		Warnings    []string       `json:"warnings"`
	}{s.Healthy(), len(s.Nodes), s.PendingCSRs, s.Drift, s.Problems, s.Warnings})
}

// printStatus prints the report as text: a summary line, a table per part, problems and warnings.
func printStatus(w io.Writer, name string, s *playbooks.ClusterStatus) {
	ready := 0
	for _, n := range s.Nodes {
		if n.Ready {
			ready++
		}
	}
	verdict := "healthy"
	if !s.Healthy() {
		verdict = fmt.Sprintf("%d problem(s)", len(s.Problems))
	}
	fmt.Fprintf(w, "cluster %s: %d of %d Node(s) Ready; %s\n\n", name, ready, len(s.Nodes), verdict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREADY\tROLES\tKUBELET\tRUNTIME\tKERNEL\tSCHEDULING")
	for _, n := range s.Nodes {
		sched := "enabled"
		if n.Cordoned {
			sched = "cordoned"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, yesNo(n.Ready), strings.Join(n.Roles, ","), n.Kubelet, n.Runtime, n.Kernel, sched)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCOMPONENT\tREADY\tVERSION\tRESTARTS\tPROBLEM")
	for _, c := range s.Components {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", c.Node, c.Component, yesNo(c.Ready), c.Version, c.Restarts, c.Problem)
	}
	tw.Flush()
	fmt.Fprintln(w)
	printEtcdStatus(w, s.Etcd)
	if len(s.Addons) > 0 {
		fmt.Fprintln(w)
		printAddons(w, s.Addons)
	}
	fmt.Fprintln(w)
	if c := s.Soonest; c != nil {
		fmt.Fprintf(w, "certificates: the first to expire is %s (%s), on %s (%s)\n", c.Path, c.Subject, c.NotAfter.UTC().Format(time.DateOnly), certs.Residual(time.Until(c.NotAfter)))
	}
	fmt.Fprintf(w, "certificate signing requests pending: %d\n", len(s.PendingCSRs))
	if s.Drift != nil {
		n := 0
		for _, c := range s.Drift {
			n += c
		}
		fmt.Fprintf(w, "drift from what up would write: %d change(s) on %d host(s)\n", n, len(s.Drift))
	}
	if l := s.Lock; l != nil {
		fmt.Fprintf(w, "run in progress: %s (renewed %s ago)\n", l.Holder, time.Since(l.Renewed).Round(time.Second))
	} else {
		fmt.Fprintln(w, "run in progress: none")
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	for _, p := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", p)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
