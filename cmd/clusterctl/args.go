package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// guardGroups makes every command that only groups others (etcd, certs, inventory, artifacts,
// completion, ...) refuse what is not one of them: cobra prints such a command's help and exits 0 for
// `clusterctl etcd snapshott`, and a cron job with a typo would look as if it worked. Alone, a group
// prints its help.
func guardGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() || !c.HasParent() {
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
