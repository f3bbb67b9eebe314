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
