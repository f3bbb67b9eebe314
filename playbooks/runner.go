package playbooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clusterctl/clusterctl/transport"
)

// Step is one phase of a playbook: a name, what it does, and when it runs. Playbooks are lists of steps,
// run in order by runSteps, each given the run's plan: what a step reads of the run comes in as its
// parameter, never from a field another step set.
type Step struct {
	Name string
	// Run does the step's work from the plan (nil for the playbooks that have none: see do).
	Run func(ctx context.Context, p *plan) error
	// Plan, in place of Run, makes the plan the steps after it take (preflight adds the hosts' facts,
	// render everything else); the plan it was given is left as it was.
	Plan func(ctx context.Context, p *plan) (*plan, error)
	// Resume, in place of Run, is a step that resumes host by host: it records in the run's journal, through
	// the progress the runner hands it, the hosts it begins and those it has done, and a run after an
	// interrupted one leaves those done alone and knows those it had begun (see runOptions.Progress).
	Resume func(ctx context.Context, p *plan, g progress) error
	// Skip, when set, says why the step does not run this time ("" runs it): a dry run, nothing to do.
	Skip func(p *plan) string
	// Dry steps run in a dry run too: they record what they would change instead of changing it (see
	// deployment.record). The others are skipped in a dry run.
	Dry bool
	// Reads: the step changes nothing on the hosts or in the cluster (up's facts and render), and may run
	// before the run holds the cluster's lock (runOptions.Held).
	Reads bool
	// Until names the later step by which the work this step leaves under way in the background has
	// ended (that step waits for it; a failure of it stops the run at the next step): up's push to the
	// hosts the control plane does not start with, the early pod network.
	Until string
}

// do is the Run of a step of a playbook that works without a plan (reset, reboot, remove-node, etcd
// restore).
func do(run func(ctx context.Context) error) func(context.Context, *plan) error {
	return func(ctx context.Context, _ *plan) error { return run(ctx) }
}

// unless is the Skip of a step of a playbook that works without a plan.
func unless(skip func() string) func(*plan) string {
	return func(*plan) string { return skip() }
}

// runOptions shape one run of a list of steps.
type runOptions struct {
	Sink   transport.Sink
	DryRun bool
	// Journal, when set, makes the run resumable step by step: a step it has as done is skipped, and each
	// step is recorded there as under way before it runs and done after (etcd restore, the CA rotation).
	Journal stepJournal
	// Progress is where the steps that resume host by host (Step.Resume) keep what they did: the run's
	// journal (upgrade, reboot, etcd restore); nil keeps nothing (a dry run reads it and writes nothing).
	Progress stepJournal
	// Before is called before each step that runs (with its index): a step may depend on what ran beside
	// the run.
	Before func(i int) error
	// Held, when set, waits until the run holds the cluster's lock (taken beside the steps that only
	// read: Env.held): called with changes true before any other step runs, and with false when the run
	// ends (a run that changed nothing needs only that no other run holds it).
	Held func(changes bool) error
	// Wrap, when set, gives a failed step's error its context.
	Wrap func(i int, err error) error
}

// stepJournal is what the runner keeps in a run's journal (a *statedir.Journal).
type stepJournal interface {
	IsDone(step string) bool
	IsCurrent(name string) bool
	Begin(names ...string) error
	MarkDone(step string, names ...string) error
}

// progress is a resuming step's part of the run's journal (Step.Resume): "STEP/HOST" done for each host it
// did, the hosts it is changing under way. Without a journal nothing is done or begun; in a dry run it is
// read and not written.
type progress struct {
	step string
	j    stepJournal
	dry  bool
}

// Done reports whether a run did host's part of the step.
func (g progress) Done(host string) bool { return g.j != nil && g.j.IsDone(g.step+"/"+host) }

// Begun reports whether hosts were being changed when a run stopped (by this step or another).
func (g progress) Begun(host string) bool { return g.j != nil && g.j.IsCurrent(host) }

// Begin records hosts as being changed.
func (g progress) Begin(hosts ...string) error {
	if g.j == nil || g.dry {
		return nil
	}
	return g.j.Begin(hosts...)
}

// Finish records host's part of the step as done, the host no longer being changed.
func (g progress) Finish(host string) error {
	if g.j == nil || g.dry {
		return nil
	}
	return g.j.MarkDone(g.step+"/"+host, host)
}

// Complete records the whole step as done (STEP): what comes after it may read it.
func (g progress) Complete() error {
	if g.j == nil || g.dry {
		return nil
	}
	return g.j.MarkDone(g.step)
}

// runSteps runs steps in order from the plan p, each announced (phase_start, phase_done with its duration
// or error) and timed, the context checked between them; it stops at the first error. Each step takes the
// plan the last plan-making step before it returned (p before any). The timings of the steps that ran are
// returned, also on error.
func runSteps(ctx context.Context, o runOptions, p *plan, steps []Step) ([]PhaseTiming, error) {
	if err := checkSteps(steps); err != nil {
		return nil, err
	}
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
			why = s.Skip(p)
		}
		if why != "" {
			emit(o.Sink, transport.Event{Type: transport.EventMessage, Play: s.Name, Message: "skipped: " + why})
			continue
		}
		if !s.Reads && o.Held != nil {
			if err := o.Held(true); err != nil {
				return timings, err
			}
		}
		next, err := runStep(ctx, o, i, s, p, &timings)
		if errors.Is(err, errSettled) {
			break // the step said why
		}
		if err != nil {
			if o.Wrap != nil {
				err = o.Wrap(i, err)
			}
			return timings, err
		}
		p = next
	}
	if o.Held != nil {
		return timings, o.Held(false)
	}
	return timings, nil
}

// checkSteps refuses a list of steps the runner cannot run as written: a step with no work or two, a name
// twice, a background part said to end by a step that does not come after it.
func checkSteps(steps []Step) error {
	seen := map[string]int{}
	for i, s := range steps {
		if n := btoi(s.Run != nil) + btoi(s.Plan != nil) + btoi(s.Resume != nil); n != 1 {
			return fmt.Errorf("step %s: exactly one of Run, Plan and Resume is set", s.Name)
		}
		if _, ok := seen[s.Name]; ok {
			return fmt.Errorf("step %s: two steps of that name", s.Name)
		}
		seen[s.Name] = i
	}
	for i, s := range steps {
		if j, ok := seen[s.Until]; s.Until != "" && (!ok || j <= i) {
			return fmt.Errorf("step %s: its background part ends by %s, which is not a step after it", s.Name, s.Until)
		}
	}
	return nil
}

// runStep runs one step of runSteps from the plan p, recorded in the journal around it, its timing added
// to timings; it returns the plan the next step takes.
func runStep(ctx context.Context, o runOptions, i int, s Step, p *plan, timings *[]PhaseTiming) (*plan, error) {
	if o.Before != nil {
		if err := o.Before(i); err != nil {
			return nil, err
		}
	}
	if o.Journal != nil {
		if err := o.Journal.Begin(s.Name); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	emit(o.Sink, transport.Event{Type: transport.EventPhaseStart, Play: s.Name})
	next, err := p, error(nil)
	switch {
	case s.Plan != nil:
		next, err = s.Plan(ctx, p)
	case s.Resume != nil:
		err = s.Resume(ctx, p, progress{step: s.Name, j: o.Progress, dry: o.DryRun})
	default:
		err = s.Run(ctx, p)
	}
	d := time.Since(start)
	*timings = append(*timings, PhaseTiming{Name: s.Name, DurationMS: d.Milliseconds()})
	done := transport.Event{Type: transport.EventPhaseDone, Play: s.Name, DurationMS: d.Milliseconds()}
	if err != nil && !errors.Is(err, errSettled) {
		done.Error = err.Error()
	}
	emit(o.Sink, done)
	if err == nil && o.Journal != nil {
		err = o.Journal.MarkDone(s.Name)
	}
	return next, err
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
