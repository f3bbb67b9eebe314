package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
)

func newInventoryCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "Check and inspect inventories",
		Long: `Check and inspect inventories: clusterctl's hosts.yaml, or Ansible/kubespray inventories in YAML or
INI, read unchanged (groups kube_control_plane, kube_node, etcd, bastion; host variables
ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file, ansible_become, ip,
access_ip; kubespray's cluster variables). group_vars/ and host_vars/ beside the file are read too.`,
		Example: `  clusterctl inventory validate -i hosts.yaml
  clusterctl inventory show -i inventory/mycluster/hosts.yaml --output json`,
	}
	cmd.AddCommand(newInventoryValidateCmd(opts), newInventoryShowCmd(opts), newInventoryMigrateCmd(opts))
	return cmd
}

func newInventoryValidateCmd(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Report every problem in an inventory, each with its file, line and column",
		Long: `Read the inventory, fill defaults and check it. A valid inventory prints a one-line summary and
exits 0; warnings and notices go to stderr. An invalid one prints every error as
FILE:LINE:COLUMN: FIELD: MESSAGE on stderr and exits 2.`,
		Example: `  clusterctl inventory validate -i hosts.yaml
  clusterctl inventory validate -i hosts.ini --output json | jq .diagnostics`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, diags, err := opts.loadInventory()
			if err != nil {
				return err
			}
			if opts.Output == "json" {
				status := "ok"
				if diags.HasErrors() {
					status = "invalid"
				}
				if err := writeReport(opts.stdout, "inventory_validation", status, validateReport(opts.Inventory, inv, diags)); err != nil {
					return err
				}
				if diags.HasErrors() {
					return &exitError{code: exitUsage, err: errReported}
				}
				return nil
			}
			printNotices(opts.stderr, diags)
			if err := diags.Err(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			_, err = fmt.Fprintln(opts.stdout, summary(opts.Inventory, inv))
			return err
		},
	}
}

func summary(file string, inv *inventory.Inventory) string {
	cps, workers := len(inv.ControlPlanes()), len(inv.Workers())
	etcd := "stacked etcd"
	if inv.ExternalEtcd() {
		etcd = fmt.Sprintf("%d external etcd", len(inv.EtcdHosts()))
	}
	return fmt.Sprintf("%s: valid %s inventory: cluster %q, Kubernetes %s, %d host%s (%d control-plane, %d worker%s, %s)",
		file, inv.Format, inv.Cluster.Name, inv.Cluster.KubernetesVersion, len(inv.Hosts), plural(len(inv.Hosts)),
		cps, workers, plural(workers), etcd)
}

// jsonDiagnostic is the JSON form of one diagnostic (documented in docs/inventory.md).
type jsonDiagnostic struct {
	Severity string `json:"severity"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
	Path     string `json:"path,omitempty"`
	Message  string `json:"message"`
}

type jsonValidateReport struct {
	File          string `json:"file"`
	Valid         bool   `json:"valid"`
	Format        string `json:"format,omitempty"`
	Cluster       string `json:"cluster,omitempty"`
	Version       string `json:"kubernetesVersion,omitempty"`
	Hosts         int    `json:"hosts"`
	ControlPlanes int    `json:"controlPlanes"`
	Workers       int    `json:"workers"`
	// EtcdHosts: the hosts of an external etcd cluster (0: etcd is stacked on the control plane).
	EtcdHosts   int              `json:"etcdHosts"`
	Diagnostics []jsonDiagnostic `json:"diagnostics"`
}

func validateReport(file string, inv *inventory.Inventory, diags inventory.Diagnostics) jsonValidateReport {
	r := jsonValidateReport{File: file, Valid: !diags.HasErrors(), Diagnostics: []jsonDiagnostic{}}
	if inv != nil {
		r.Format, r.Cluster, r.Version = string(inv.Format), inv.Cluster.Name, inv.Cluster.KubernetesVersion
		r.Hosts, r.ControlPlanes, r.Workers = len(inv.Hosts), len(inv.ControlPlanes()), len(inv.Workers())
		if inv.ExternalEtcd() {
			r.EtcdHosts = len(inv.EtcdHosts())
		}
	}
	for _, d := range diags {
		r.Diagnostics = append(r.Diagnostics, jsonDiagnostic{Severity: d.Severity.String(), File: d.Pos.File,
			Line: d.Pos.Line, Column: d.Pos.Col, Path: d.Pos.Path, Message: d.Message})
	}
	return r
}

func newInventoryShowCmd(opts *globalOptions) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the inventory as clusterctl understands it, after defaults",
		Long: `Print the normalized inventory, whatever the input format, with every default filled in. The YAML
output is itself a valid clusterctl hosts.yaml, so this also converts an Ansible/kubespray inventory.
Variables of an Ansible inventory that clusterctl does not use are listed at the end.

--full writes every field of hosts.yaml, each under the first sentence of its documentation (as
docs/inventory.md gives it): values the file does not write are marked "# default", fields not set are
written as comments. The result is still a valid hosts.yaml.`,
		Example: `  clusterctl inventory show -i hosts.yaml
  clusterctl inventory show -i hosts.yaml --full | less
  clusterctl inventory show -i kubespray/inventory/prod/hosts.ini > hosts.yaml
  clusterctl inventory show -i hosts.yaml --output json | jq '.hosts[].name'`,
		Args:        noArgs,
		Annotations: map[string]string{outputsAnnotation: "text,yaml,json"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, diags, err := opts.loadInventory()
			if err != nil {
				return err
			}
			printNotices(opts.stderr, diags)
			if err := diags.Err(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if full && opts.Output == "json" {
				return usageError("--full writes YAML with comments; -o json gives every field already (and no comments)")
			}
			if full {
				out, err := inv.MarshalFull()
				if err != nil {
					return err
				}
				_, err = opts.stdout.Write(out)
				return err
			}
			if opts.Output == "json" {
				return writeReport(opts.stdout, "inventory", "ok", struct {
					*inventory.Inventory
					Source  string   `json:"source"`
					Format  string   `json:"format"`
					Ignored []string `json:"ignored"`
				}{inv, opts.Inventory, string(inv.Format), ignoredList(inv)})
			}
			out, err := inv.MarshalNative()
			if err != nil {
				return err
			}
			_, err = opts.stdout.Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "every field, each under its documentation, defaults marked, unset fields as comments")
	return cmd
}

func ignoredList(inv *inventory.Inventory) []string {
	out := []string{}
	for _, p := range inv.Ignored {
		out = append(out, fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Path))
	}
	return out
}

// writeJSONLine writes one compact JSON object and a newline (JSON lines output).
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// writeResultLine writes a command's result as one JSON line: its type, "ok", "failed" or (for an error
// wrapping refused) "refused", the error's text, the result's own fields (none for a nil result), and how
// long the command took.
func writeResultLine(w io.Writer, typ string, res any, err, refused error, took time.Duration) error {
	status, errText := "ok", ""
	if err != nil {
		status, errText = "failed", err.Error()
		if refused != nil && errors.Is(err, refused) {
			status = "refused"
		}
	}
	return writeLast(w, typ, status, errText, res, &took)
}

// writeReport writes a read-only command's report as its last JSON line: its type, its status (ok, or what
// its exit code says: failed, invalid) and the report's own fields.
func writeReport(w io.Writer, typ, status string, report any) error {
	return writeLast(w, typ, status, "", report, nil)
}

// writeLast writes the last JSON line of a command (the convention of docs/cli.md): type, status, error,
// the fields of v, and the duration when one is given.
func writeLast(w io.Writer, typ, status, errText string, v any, took *time.Duration) error {
	head, err := json.Marshal(struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Error  string `json:"error,omitempty"`
	}{typ, status, errText})
	if err != nil {
		return err
	}
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	line := make([]byte, 0, len(head)+len(body)+32)
	line = append(line, head[:len(head)-1]...)
	if inner := body[1 : len(body)-1]; len(inner) > 0 && string(body) != "null" {
		line = append(append(line, ','), inner...)
	}
	if took != nil {
		line = append(line, fmt.Sprintf(",\"duration_ms\":%d", took.Milliseconds())...)
	}
	return endedWith(w, append(line, '}', '\n'))
}

// statusOf is a report's status: ok, or failed.
func statusOf(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// printNotices writes the warnings and notices of a load; errors are the caller's to report.
func printNotices(w io.Writer, diags inventory.Diagnostics) {
	for _, d := range diags {
		if d.Severity != inventory.Error {
			fmt.Fprintln(w, d)
		}
	}
}
