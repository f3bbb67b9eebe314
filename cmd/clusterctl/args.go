package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clusterctl/clusterctl/tasks/preflight"
)

// guardGroups makes every command that only groups others (clusterctl itself, etcd, certs, inventory,
// artifacts, completion, ...) refuse what is not one of them: cobra prints such a command's help and exits 0 for
// `clusterctl etcd snapshott`, and a cron job with a typo would look as if it worked. Alone, a group
// prints its help.
func guardGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = unknownSubcommand
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// unknownSubcommand refuses an argument of a group command: not one of its commands (a suggestion when one
// is near).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for the root's commands
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		return usageError("%s; did you mean %q?", msg, s[0])
	}
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return usageError("%s (its commands: %s)", msg, strings.Join(names, ", "))
}

// noArgs refuses arguments of a command that takes none, naming it: cobra calls the first one an
// unknown command, which it is not.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return usageError("%s takes no arguments, got %q (its flags start with --: clusterctl %s --help)", cmd.CommandPath(), strings.Join(args, " "), strings.TrimPrefix(cmd.CommandPath(), "clusterctl "))
}

// atLeastOne is for commands that take one or more WHAT (host names, a command): none is an error
// naming them.
func atLeastOne(what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return nil
		}
		return usageError("%s needs %s: %s", cmd.CommandPath(), what, example)
	}
}

// zeroOK is the annotation of a count or duration flag for which 0 means something (--fresh 0 renews
// every certificate); on the others 0 is refused like a negative value.
const zeroOK = "clusterctl/zero-ok"

// allowZero marks flag name of cmd as taking 0.
func allowZero(cmd *cobra.Command, name string) {
	if err := cmd.Flags().SetAnnotation(name, zeroOK, []string{"true"}); err != nil {
		panic(err) // a flag that does not exist: a bug the tests find
	}
}

// checkValues refuses, before a command runs, a count below 1 and a duration below or at 0 given on its
// command line (but 0 where the flag says it means something), and names of --ignore-preflight-errors that
// are no check's.
func checkValues(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		_, zero := f.Annotations[zeroOK]
		switch f.Value.Type() {
		case "int":
			var n int
			if _, scanErr := fmt.Sscan(f.Value.String(), &n); scanErr == nil && (n < 0 || n == 0 && !zero) {
				err = usageError("--%s must be at least %d, got %d", f.Name, map[bool]int{true: 0, false: 1}[zero], n)
			}
		case "duration":
			d, parseErr := time.ParseDuration(f.Value.String())
			if parseErr == nil && (d < 0 || d == 0 && !zero) {
				what := "longer than 0"
				if zero {
					what = "0 or longer"
				}
				err = usageError("--%s must be %s, got %s", f.Name, what, f.Value.String())
			}
		}
		if f.Name == "ignore-preflight-errors" {
			if names, ok := f.Value.(pflag.SliceValue); ok {
				if cerr := preflight.CheckIgnored(names.GetSlice()); cerr != nil {
					err = &exitError{code: exitUsage, err: cerr}
				}
			}
		}
	})
	return err
}
