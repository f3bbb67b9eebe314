// Command labmirror serves the lab's artifacts directory in the upstream download layouts and a registry
// (package mirror) on loopback while it runs a command, to which it appends the flags that point
// `clusterctl artifacts pull` (or `clusterctl up`) at the mirror; it exits with the command's status.
//
//	labmirror -artifacts ~/.cache/clusterctl-lab/v1.37.2 -- bin/clusterctl artifacts pull --kubernetes-version v1.37.2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"

	"github.com/clusterctl/clusterctl/test/lab/mirror"
)

func main() { os.Exit(run()) }

func run() int {
	dir := flag.String("artifacts", "", "the lab's artifacts directory (test/lab/artifacts.sh prints it)")
	addons := flag.String("addons", "", "an add-ons directory (test/lab/build-addons.sh prints it) served too: its charts as a Helm repository and OCI artifacts, the command's environment naming them (CLUSTERCTL_LAB_CHARTS, CLUSTERCTL_LAB_CHARTS_OCI)")
	flag.Parse()
	if *dir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: labmirror -artifacts DIR -- COMMAND [ARGS...]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := mirror.Start(ctx, *dir, os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "labmirror:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "labmirror: serving %s at %s (registry %s)\n", *dir, m.URL, m.Registry)
	env := os.Environ()
	if *addons != "" {
		if err := m.ServeAddons(ctx, *addons); err != nil {
			_ = m.Close()
			fmt.Fprintln(os.Stderr, "labmirror:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "labmirror: add-ons of %s: charts at %s and %s\n", *addons, m.ChartsURL(), m.ChartsOCI())
		env = append(env, "CLUSTERCTL_LAB_CHARTS="+m.ChartsURL(), "CLUSTERCTL_LAB_CHARTS_OCI="+m.ChartsOCI())
	}
	args := append(slices.Clone(flag.Args()[1:]), m.Flags()...)
	cmd := exec.CommandContext(ctx, flag.Arg(0), args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	err = cmd.Run()
	_ = m.Close()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "labmirror:", err)
		return 1
	}
	return 0
}
