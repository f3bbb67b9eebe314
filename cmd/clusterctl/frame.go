package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/clusterctl/clusterctl/playbooks"
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
	res, err := c.play(ctx)
	took := time.Since(start)
	c.view.Recap()
	if c.notes != nil {
		c.notes(res, err)
	}
	if g.Output == "json" {
		if werr := writeResultLine(g.stdout, c.result, res, err, c.refused, took); werr != nil {
			return werr
		}
	}
	if err != nil {
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
