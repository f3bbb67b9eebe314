package playbooks

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterctl/clusterctl/transport"
)

// Step is one phase of a playbook: a name, what it does, and when it runs. Playbooks are lists of steps,
// run in order by run.
type Step struct {
	Name string
	Run  func(ctx context.Context) error
	// Skip, when set, says why the step does not run this time ("" runs it): a dry run, nothing to do.
	Skip func() string
	// Dry steps run in a dry run too: they record what they would change instead of changing it (see
	// deployment.record). The others are skipped in a dry run.
	Dry bool
}

// runOptions shape one run of a list of steps.
type runOptions struct {
	Sink   transport.Sink
	DryRun bool
	// From is the index of the first step to run: an interrupted run resumes there.
	From int
	// Before and After are called around each step that runs (with its index): resume points are saved
	// there.
	Before, After func(i int) error
	// Wrap, when set, gives a failed step's error its context.
	Wrap func(i int, err error) error
}

// runSteps runs steps in order, each announced (phase_start, phase_done with its duration or error) and
// timed, the context checked between them; it stops at the first error. The timings of the steps that ran
// are returned, also on error.
func runSteps(ctx context.Context, o runOptions, steps []Step) ([]PhaseTiming, error) {
	timings := []PhaseTiming{}
	for i := o.From; i < len(steps); i++ {
		s := steps[i]
		if err := ctx.Err(); err != nil {
			return timings, err
		}
		why := ""
		switch {
		case o.DryRun && !s.Dry:
			why = "dry run"
		case s.Skip != nil:
			why = s.Skip()
		}
		if why != "" {
			emit(o.Sink, transport.Event{Type: transport.EventMessage, Play: s.Name, Message: "skipped: " + why})
			continue
		}
		if o.Before != nil {
			if err := o.Before(i); err != nil {
				return timings, err
			}
		}
		start := time.Now()
		emit(o.Sink, transport.Event{Type: transport.EventPhaseStart, Play: s.Name})
		err := s.Run(ctx)
		d := time.Since(start)
		timings = append(timings, PhaseTiming{Name: s.Name, DurationMS: d.Milliseconds()})
		done := transport.Event{Type: transport.EventPhaseDone, Play: s.Name, DurationMS: d.Milliseconds()}
		if err != nil {
			done.Error = err.Error()
		}
		emit(o.Sink, done)
		if err == nil && o.After != nil {
			err = o.After(i)
		}
		if err != nil {
			if o.Wrap != nil {
				err = o.Wrap(i, err)
			}
			return timings, err
		}
	}
	return timings, nil
}

func emit(sink transport.Sink, e transport.Event) {
	if sink != nil {
		e.Time = time.Now()
		sink.Emit(e)
	}
}

// say emits a message of a play, about a host or ("") the run.
func say(sink transport.Sink, play, host, format string, args ...any) {
	emit(sink, transport.Event{Type: transport.EventMessage, Play: play, Host: host, Message: fmt.Sprintf(format, args...)})
}
