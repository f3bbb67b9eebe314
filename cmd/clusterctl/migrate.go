package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

func newInventoryMigrateCmd(opts *globalOptions) *cobra.Command {
	var out string
	var inPlace bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move a hosts.yaml to the schema version this clusterctl writes (apiVersion " + inventory.APIVersion + ")",
		Long: `Rewrite a native hosts.yaml for the schema version this clusterctl writes, step by step from the one
it says (apiVersion; a file without one is from before apiVersion existed and is read as clusterctl/v1),
keeping its comments and layout: only what a version changed is changed. A file already at the current
version is left as it is. Ansible inventories have no version: clusterctl reads them as they are.

The result goes to stdout, to --out FILE (never over an existing file), or with --in-place over the file
itself, atomically (a file never half-written) and with its mode kept.`,
		Example: `  clusterctl inventory migrate -i hosts.yaml --in-place
  clusterctl inventory migrate -i hosts.yaml --out hosts.new.yaml && diff hosts.yaml hosts.new.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Inventory == "" {
				return usageError("no inventory: give the hosts.yaml to migrate with -i FILE")
			}
			if inPlace && out != "" {
				return usageError("--in-place and --out: give one (--in-place rewrites -i's file)")
			}
			if opts.Output == "json" && out == "" && !inPlace {
				return usageError("migrate writes the inventory itself to stdout; with -o json give --out FILE or --in-place")
			}
			data, err := os.ReadFile(opts.Inventory)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return usageError("inventory %s does not exist", opts.Inventory)
			case err != nil:
				return usageError("reading inventory %s: %v", opts.Inventory, err)
			}
			migrated, m, err := inventory.Migrate(opts.Inventory, data)
			if err != nil {
				return usageError("%s: %v", opts.Inventory, err)
			}
			from := m.From
			if from == "" {
				from = "no apiVersion"
			}
			written, err := writeMigrated(opts, migrated, m.Changed(), out, inPlace)
			if err != nil {
				return err
			}
			if m.Changed() {
				where := "stdout"
				if written != "" {
					where = written
				}
				fmt.Fprintf(opts.stderr, "%s: from %s to %s (%s), written to %s\n", opts.Inventory, from, inventory.APIVersion, strings.Join(m.Steps, ", "), where)
			}
			if opts.Output == "json" {
				return writeReport(opts.stdout, "inventory_migration", "ok", map[string]any{"file": opts.Inventory, "from": m.From,
					"to": inventory.APIVersion, "changed": m.Changed(), "written": written})
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the file to write the migrated inventory to (default: stdout); an existing file is refused")
	cmd.Flags().BoolVar(&inPlace, "in-place", false, "rewrite the inventory file itself, atomically")
	return cmd
}

// writeMigrated writes the migrated inventory where migrate was asked to, and returns the file written ("" for
// stdout, or for none when nothing changed).
func writeMigrated(opts *globalOptions, migrated []byte, changed bool, out string, inPlace bool) (string, error) {
	written := ""
	switch {
	case !changed && out == "":
		if !inPlace {
			if _, err := opts.stdout.Write(migrated); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(opts.stderr, "%s: already %s; nothing to change\n", opts.Inventory, inventory.APIVersion)
	case inPlace:
		st, err := os.Stat(opts.Inventory)
		if err != nil {
			return "", err
		}
		if err := statedir.WriteFile(opts.Inventory, migrated, st.Mode().Perm()); err != nil {
			return "", err
		}
		written = opts.Inventory
	default:
		wrote, err := writeOut(opts, out, migrated, 0o644, "migrate never writes over a file (--in-place rewrites the inventory itself)")
		if err != nil {
			return "", err
		}
		if wrote {
			written = out
		}
	}
	return written, nil
}
