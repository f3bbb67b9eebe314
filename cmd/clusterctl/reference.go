package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliReference is docs/cli.md: every command with its flags, made from the commands themselves (a test
// compares the file with it, so the document cannot drift from the binary).
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("Generated from the commands (`go test ./cmd/clusterctl -run TestCLIReference -update`); `clusterctl <command> --help`\n")
	b.WriteString("says the same with examples. Flags every command takes:\n\n")
	flagTable(&b, root.PersistentFlags())
	b.WriteString("\nExit codes: 0 success, 1 the operation failed (or a bug: \"internal error\"), 2 bad usage or bad inventory\n")
	b.WriteString("(nothing was changed), 130 interrupted.\n\n")
	b.WriteString("One vocabulary: `--dry-run` changes nothing and prints, per host, what the command would do (every command\n")
	b.WriteString("that changes hosts has it, exec aside: it runs what you give it); `--yes` skips the confirmation; `--node-timeout` bounds each wait on a node\n")
	b.WriteString("(`--api-timeout` the first API server's), `--drain-timeout` a node's drain (5m everywhere); `--out` is the\n")
	b.WriteString("file a command writes (init, kubeconfig user, etcd snapshot, which also takes a directory) or the\n")
	b.WriteString("directory of the many it writes (render); `--dir` is an artifacts directory, read or filled;\n")
	b.WriteString("`--ignore-preflight-errors` and `--max-clock-skew` on every command that runs preflight.\n")
	b.WriteString(jsonConvention)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			fmt.Fprintf(&b, "\n## `%s`\n\n%s\n", strings.TrimSpace(sub.CommandPath()+" "+argsOf(sub)), sub.Short)
			if sub.HasLocalFlags() && sub.LocalNonPersistentFlags().HasAvailableFlags() {
				b.WriteString("\n")
				flagTable(&b, sub.LocalNonPersistentFlags())
			}
			walk(sub)
		}
	}
	walk(root)
	return b.String()
}

// argsOf is the part of a command's Use after its name.
func argsOf(c *cobra.Command) string {
	_, rest, _ := strings.Cut(c.Use, " ")
	return rest
}

func flagTable(b *strings.Builder, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := f.DefValue
		switch {
		case f.Value.Type() == "bool" && def == "false", def == "" || def == "[]":
			def = ""
		default:
			def = "`" + def + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, strings.ReplaceAll(f.Usage, "|", `\|`)))
	})
	sort.Strings(rows)
	b.WriteString("| flag | default | what it does |\n|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// jsonConvention is docs/cli.md's section on -o json (TestJSONConvention holds every command to it).
const jsonConvention = `
## JSON output (` + "`-o json`" + `)

Every command writes JSON lines to stdout: one object per line, each with a ` + "`type`" + `. The last line is the
command's result and has a ` + "`status`" + `: ` + "`ok`" + ` (exit 0), ` + "`failed`" + ` (exit 1), ` + "`refused`" + ` (exit 1: the command
would not start, such as an upgrade the readiness report blocks), ` + "`invalid`" + ` (exit 2: bad usage or inventory,
nothing changed) or ` + "`interrupted`" + ` (exit 130); with ` + "`error`" + ` (the message, as on stderr) when it is not ok. A
command stopped before its result (a bad flag, an unreadable inventory, hosts it could not reach) ends with
` + "`{\"type\":\"error\",\"status\":...,\"error\":...,\"exitCode\":N}`" + `. Human text (progress, notices, what
to do next) goes to stderr.

| lines before the last | type of the last line | commands |
|---|---|---|
| events: ` + "`phase_start`, `phase_done`, `play_start`, `host_start`, `host_done` (`host`, `status`: ok, changed, skipped, failed, unreachable; `error`), `play_done`, `message`" + ` | ` + "`up_result`, `upgrade_result`, `reset_result`, `reset_plan`, `remove_node_result`, `remove_node_plan`, `rotate_result`, `rotate_plan`, `ca_rotate_result`, `encryption_rotate_result`, `encryption_rotate_plan`, `reboot_result`, `etcd_snapshot`, `etcd_restore`" + `, with ` + "`duration_ms`" + ` | up, add-node, upgrade, reset, remove-node, certs rotate, encryption rotate, reboot, etcd snapshot, etcd restore |
| the same events | ` + "`preflight_report`" + ` | preflight |
| ` + "`exec`" + ` per host (` + "`host`, `status`, `exitCode`, `stdout`, `stderr`, `error`" + `) | ` + "`exec_result`" + ` (` + "`hosts`, `failed`" + `) | exec |
| ` + "`addon`" + ` per release | ` + "`addons`" + ` (` + "`addons`, `notDeployed`" + `) | addons list |
| ` + "`progress`, `file_done`" + ` per file | ` + "`pull_result`" + ` | artifacts pull |
| none | ` + "`certificates` (with `unread`: the hosts not read and why), `ca_hash`, `etcd_status` (a member not reached has `member: null`), `etcd_snapshots`, `encryption_status`, `issued_users`, `inventory_validation`, `inventory`, `inventory_migration` (with --out or --in-place), `artifacts`, `artifacts_verification`, `render_result`, `init_result` (with --out), `version`" + ` | the read-only commands |

kubeconfig and kubeconfig user write a kubeconfig (a document of its own) and take text only.
`
