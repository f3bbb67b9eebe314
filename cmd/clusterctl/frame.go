package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/runlock"
)

// change is the frame of every command that changes hosts, written once: once the command has opened its
// session, the operator's consent (unless --yes or a dry run), the playbook, the recap, the result line
// (--output json) or the text report, and the exit code the error makes.
type change[R any] struct {
	g    *globalOptions
	view *eventView
	// ask is asked before anything changes; nil: nothing to ask.
	ask *question
	// play runs the playbook; its result may be nil when it fails.
	play func(ctx context.Context) (*R, error)
	// result is the type of the result line (--output json); refused is the error whose failures it calls
	// "refused" rather than "failed".
	result  string
	refused error
	// notes, when set, says what the command says beside its result once the run is over, in any output
	// (warnings, the preflight report, a dry run's plan).
	notes func(res *R, err error)
	// failed, when set, makes the exit of a failure; failedOnHosts otherwise.
	failed func(res *R, err error) error
	// report, when set, prints a run that succeeded, as text.
	report func(w io.Writer, res *R, took time.Duration)
	// lock, when set, is taken before the playbook runs and given up when it ends (see mutating).
	lock *runLock
}

// runLock is the lock a mutating run takes: its session and how.
type runLock struct {
	env *playbooks.Env
	o   playbooks.LockOptions
}

// mutating is the lock of a command that changes hosts or the cluster, nil for its dry run (dry runs and
// read-only commands take none): the command's name as typed, and --force-unlock.
func mutating(cmd *cobra.Command, g *globalOptions, env *playbooks.Env, dry bool) *runLock {
	if dry {
		return nil
	}
	return &runLock{env: env, o: playbooks.LockOptions{Command: strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), Force: g.ForceUnlock}}
}

// addLockFlag adds --force-unlock to a command that takes the lock, and returns its flags.
func addLockFlag(cmd *cobra.Command, g *globalOptions) *pflag.FlagSet {
	cmd.Flags().BoolVar(&g.ForceUnlock, "force-unlock", false, "take the cluster's lock even though another run holds it (one that died without giving it up); the two runs may undo each other's changes if the other still works")
	return cmd.Flags()
}

// question is what a command asks the operator before it changes anything (see confirm).
type question struct {
	what, ask string
	// accept says whether the answer typed confirms; yes (y or yes) when nil.
	accept func(answer string) bool
	// skip: the operator said --yes, or the run is a dry run.
	skip bool
}

func (c change[R]) run(ctx context.Context) error {
	g := c.g
	if q := c.ask; q != nil && !q.skip {
		accept := q.accept
		if accept == nil {
			accept = yes
		}
		if err := confirm(g, q.what, q.ask, accept); err != nil {
			return err
		}
	}
	start := time.Now()
	res, err := c.locked(ctx)
	took := time.Since(start)
	c.view.Recap()
	if c.notes != nil {
		c.notes(res, err)
	}
	refused := c.refused
	if errors.Is(err, runlock.ErrHeld) {
		refused = runlock.ErrHeld
	}
	if g.Output == "json" {
		if werr := writeResultLine(g.stdout, c.result, res, err, refused, took); werr != nil {
			return werr
		}
	}
	if err != nil {
		if errors.Is(err, runlock.ErrHeld) {
			return &exitError{code: exitFailed, err: err}
		}
		if c.failed != nil {
			return c.failed(res, err)
		}
		return failedOnHosts(err)
	}
	if g.Output != "json" && c.report != nil {
		c.report(g.stdout, res, took)
	}
	return nil
}

// locked runs the playbook under the run's lock, when it takes one.
func (c change[R]) locked(ctx context.Context) (*R, error) {
	if c.lock == nil {
		return c.play(ctx)
	}
	release, err := c.lock.env.Lock(ctx, c.lock.o)
	if err != nil {
		return nil, err
	}
	defer release()
	return c.play(ctx)
}

// preflightFailed is the exit of a run that preflight stopped (exit 1, its report already printed), or of
// any other failure.
func preflightFailed[R any](_ *R, err error) error {
	if errors.Is(err, playbooks.ErrPreflight) {
		return &exitError{code: exitFailed, err: errReported}
	}
	return failedOnHosts(err)
}

// planResult is a dry run's result: what each host would see done.
type planResult struct {
	Plan []playbooks.HostPlan `json:"plan"`
}
