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
	// Journal, when set, makes the run resumable: a step it has as done is skipped, and each step is
	// recorded there as under way before it runs and done after.
	Journal stepJournal
	// Before is called before each step that runs (with its index): a step may depend on what ran beside
	// the run.
	Before func(i int) error
	// Wrap, when set, gives a failed step's error its context.
	Wrap func(i int, err error) error
}

// stepJournal is what the runner keeps in a run's journal (a *statedir.Journal).
type stepJournal interface {
	IsDone(step string) bool
	Begin(names ...string) error
	MarkDone(step string, names ...string) error
}

// runSteps runs steps in order, each announced (phase_start, phase_done with its duration or error) and
// timed, the context checked between them; it stops at the first error. The timings of the steps that ran
// are returned, also on error.
func runSteps(ctx context.Context, o runOptions, steps []Step) ([]PhaseTiming, error) {
	timings := []PhaseTiming{}
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return timings, err
		}
		why := ""
		switch {
		case o.DryRun && !s.Dry:
			why = "dry run"
		case o.Journal != nil && o.Journal.IsDone(s.Name):
			why = "done by the run that was interrupted"
		case s.Skip != nil:
			why = s.Skip()
		}
		if why != "" {
			emit(o.Sink, transport.Event{Type: transport.EventMessage, Play: s.Name, Message: "skipped: " + why})
			continue
		}
		err := runStep(ctx, o, i, s, &timings)
		if err != nil {
			if o.Wrap != nil {
				err = o.Wrap(i, err)
			}
			return timings, err
		}
	}
	return timings, nil
}

// runStep runs one step of runSteps, recorded in the journal around it, its timing added to timings.
func runStep(ctx context.Context, o runOptions, i int, s Step, timings *[]PhaseTiming) error {
	if o.Before != nil {
		if err := o.Before(i); err != nil {
			return err
		}
	}
	if o.Journal != nil {
		if err := o.Journal.Begin(s.Name); err != nil {
			return err
		}
	}
	start := time.Now()
	emit(o.Sink, transport.Event{Type: transport.EventPhaseStart, Play: s.Name})
	err := s.Run(ctx)
	d := time.Since(start)
	*timings = append(*timings, PhaseTiming{Name: s.Name, DurationMS: d.Milliseconds()})
	done := transport.Event{Type: transport.EventPhaseDone, Play: s.Name, DurationMS: d.Milliseconds()}
	if err != nil {
		done.Error = err.Error()
	}
	emit(o.Sink, done)
	if err == nil && o.Journal != nil {
		err = o.Journal.MarkDone(s.Name)
	}
	return err
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

// PhaseTiming is how long a phase (a step) took.
type PhaseTiming struct {
	Name       string `json:"name"`
	DurationMS int64  `json:"duration_ms"`
}

// Options are defaulted one way in every playbook: a zero wait or count takes its default, a nil clock is
// the real one.
const defaultWait = 5 * time.Minute

// orDefault sets *v to def when it is zero.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// clockOr is now, or the real clock when it is nil.
func clockOr(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
