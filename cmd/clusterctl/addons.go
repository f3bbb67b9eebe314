package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/charts"
)

func newAddonsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "addons",
		Short: "The add-ons clusterctl installed (cluster.addons: Helm charts and manifests)",
		Long: `clusterctl up installs the inventory's add-ons (cluster.addons) once the nodes are Ready: Helm charts with
the Helm SDK, manifests with server-side apply, through the SSH connection of the first control-plane
host. It upgrades what changed, leaves the rest alone, and uninstalls the add-ons taken out of the
inventory: only those it installed (its Helm releases carry the label clusterctl.dev/managed=true).`,
		Example: "  clusterctl addons list -i hosts.yaml\n  clusterctl addons list -i hosts.yaml -o json",
	}
	cmd.AddCommand(newAddonsListCmd(g))
	return cmd
}

func newAddonsListCmd(g *globalOptions) *cobra.Command {
	var ssh sshOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the add-ons clusterctl installed: release, chart, version, namespace, revision, status",
		Long: `List the Helm releases clusterctl installed (in every namespace) and the manifests add-ons it applied,
read from the cluster through the first control-plane host's SSH connection. A release installed by
anyone else is not listed: helm list shows every release.

Exit 0 when every add-on is deployed; 1 when one is not (failed, or pending: an interrupted run that
clusterctl up finishes).`,
		Example: "  clusterctl addons list -i hosts.yaml\n  clusterctl addons list -i hosts.yaml -o json | jq -r 'select(.status != \"deployed\") | .name'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := openCluster(g, &ssh, newEventView(io.Discard, "plain"))
			if err != nil {
				return err
			}
			defer env.Close()
			list, err := playbooks.Addons(cmd.Context(), env)
			if err != nil {
				return failedOnHosts(err)
			}
			if g.Output == "json" {
				for _, r := range list {
					if err := writeJSONLine(g.stdout, struct {
						Type string `json:"type"`
						charts.Release
					}{"addon", r}); err != nil {
						return err
					}
				}
				notDeployed := 0
				for _, r := range list {
					if r.Status != "deployed" {
						notDeployed++
					}
				}
				if err := writeReport(g.stdout, "addons", statusOf(notDeployed == 0), map[string]int{"addons": len(list), "notDeployed": notDeployed}); err != nil {
					return err
				}
			} else {
				printAddons(g.stdout, list)
			}
			for _, r := range list {
				if r.Status != "deployed" {
					return &exitError{code: exitFailed, err: fmt.Errorf("add-on %s is %s: clusterctl up finishes it", r.Name, r.Status)}
				}
			}
			return nil
		},
	}
	ssh.addFlags(cmd)
	return cmd
}

func printAddons(w io.Writer, list []charts.Release) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no add-ons installed by clusterctl")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNAMESPACE\tCHART\tVERSION\tREVISION\tSTATUS\tUPDATED")
	for _, r := range list {
		updated := "-"
		if !r.Updated.IsZero() {
			updated = r.Updated.UTC().Format(time.RFC3339)
		}
		version := r.Version
		if version == "" {
			version = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Name, r.Namespace, r.Chart, version, r.Revision, r.Status, updated)
	}
	tw.Flush()
}
