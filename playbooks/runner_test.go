package playbooks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/transport"
)

type eventLog struct {
	mu     sync.Mutex
	events []transport.Event
}

func (l *eventLog) Emit(e transport.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) lines() []string {
	var out []string
	for _, e := range l.events {
		s := e.Type + " " + e.Play
		if e.Error != "" {
			s += " error=" + e.Error
		}
		if e.Message != "" {
			s += " " + e.Message
		}
		out = append(out, s)
	}
	return out
}

func TestRunStepsOrderSkipResume(t *testing.T) {
	var ran []string
	step := func(name string) Step {
		return Step{Name: name, Run: func(context.Context, *plan) error { ran = append(ran, name); return nil }}
	}
	nothing := step("c")
	nothing.Skip = func(*plan) string { return "nothing to join" }
	dry := step("b")
	dry.Dry = true
	steps := []Step{step("a"), dry, nothing, step("d")}

	log := &eventLog{}
	var before []int
	// A journal that has a done (an interrupted run did it): the run resumes after it.
	j := statedir.NewJournal[struct{}](filepath.Join(t.TempDir(), "runs", "x.json"), "x", "", time.Now())
	if err := j.MarkDone("a"); err != nil {
		t.Fatal(err)
	}
	timings, err := runSteps(context.Background(), runOptions{Sink: log, Journal: j,
		Before: func(i int) error { before = append(before, i); return nil }}, nil, steps)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []string{"b", "d"}) || !slices.Equal(before, []int{1, 3}) {
		t.Errorf("ran %v, before %v", ran, before)
	}
	if saved, err := statedir.OpenJournal[struct{}](j.Path(), "x"); err != nil || !slices.Equal(saved.Done, []string{"a", "b", "d"}) || len(saved.Current) != 0 {
		t.Errorf("journal %+v %v", saved, err)
	}
	if len(timings) != 2 || timings[0].Name != "b" || timings[1].Name != "d" {
		t.Errorf("timings %+v", timings)
	}
	want := []string{"message a skipped: done by the run that was interrupted", "phase_start b", "phase_done b", "message c skipped: nothing to join", "phase_start d", "phase_done d"}
	if got := log.lines(); !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A dry run runs the dry steps only.
	ran = nil
	if _, err := runSteps(context.Background(), runOptions{DryRun: true}, nil, steps); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []string{"b"}) {
		t.Errorf("dry run ran %v", ran)
	}
}

func TestRunStepsStopsAtFailureAndCancel(t *testing.T) {
	var ran []string
	boom := errors.New("boom")
	ctx, cancel := context.WithCancel(context.Background())
	steps := []Step{
		{Name: "a", Run: func(context.Context, *plan) error { ran = append(ran, "a"); return nil }},
		{Name: "b", Run: func(context.Context, *plan) error { ran = append(ran, "b"); return boom }},
		{Name: "c", Run: func(context.Context, *plan) error { ran = append(ran, "c"); return nil }},
	}
	log := &eventLog{}
	j := statedir.NewJournal[struct{}](filepath.Join(t.TempDir(), "x.json"), "x", "", time.Now())
	timings, err := runSteps(ctx, runOptions{Sink: log, Journal: j,
		Wrap: func(i int, err error) error { return fmt.Errorf("step %d: %w", i, err) }}, nil, steps)
	if !errors.Is(err, boom) || err.Error() != "step 1: boom" {
		t.Errorf("error %v", err)
	}
	if !slices.Equal(ran, []string{"a", "b"}) || !slices.Equal(j.Done, []string{"a"}) || !slices.Equal(j.Current, []string{"b"}) || len(timings) != 2 {
		t.Errorf("ran %v, done %v, under way %v (a failed step is not done), timings %v", ran, j.Done, j.Current, timings)
	}
	if got := log.lines(); got[len(got)-1] != "phase_done b error=boom" {
		t.Errorf("last event %q", got[len(got)-1])
	}

	// A cancelled context ends the run between steps.
	ran = nil
	steps[0].Run = func(context.Context, *plan) error { ran = append(ran, "a"); cancel(); return nil }
	if _, err := runSteps(ctx, runOptions{}, nil, steps); !errors.Is(err, context.Canceled) || !slices.Equal(ran, []string{"a"}) {
		t.Errorf("after cancel: %v, ran %v", err, ran)
	}
}

// Each step takes the plan the last plan-making step before it returned; a plan-making step leaves the plan
// it was given as it was; a dry run's skipped plan-making step passes the plan on unchanged.
func TestRunStepsThreadsThePlan(t *testing.T) {
	first := &plan{member: "first"}
	seen := map[string]string{}
	look := func(name string) Step {
		return Step{Name: name, Run: func(_ context.Context, p *plan) error { seen[name] = p.member; return nil }}
	}
	steps := []Step{
		look("a"),
		{Name: "make", Plan: func(_ context.Context, p *plan) (*plan, error) {
			return p.with(func(p *plan) { p.member = "made" }), nil
		}},
		look("b"),
		{Name: "remake", Skip: func(p *plan) string { seen["skip"] = p.member; return "" }, Plan: func(_ context.Context, p *plan) (*plan, error) {
			return p.with(func(p *plan) { p.member += " again" }), nil
		}},
		look("c"),
	}
	if _, err := runSteps(context.Background(), runOptions{}, first, steps); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "first", "b": "made", "skip": "made", "c": "made again"}
	if !maps.Equal(seen, want) || first.member != "first" {
		t.Errorf("seen %v (want %v), the first plan %q", seen, want, first.member)
	}
}

// The runner refuses steps it cannot run as written, before running any.
func TestCheckSteps(t *testing.T) {
	run := func(context.Context, *plan) error { return nil }
	mk := func(_ context.Context, p *plan) (*plan, error) { return p, nil }
	for _, c := range []struct {
		steps []Step
		err   string
	}{
		{[]Step{{Name: "a"}}, "step a: exactly one of Run, Plan and Resume is set"},
		{[]Step{{Name: "a", Run: run, Plan: mk}}, "step a: exactly one of Run, Plan and Resume is set"},
		{[]Step{{Name: "a", Run: run}, {Name: "a", Run: run}}, "step a: two steps of that name"},
		{[]Step{{Name: "a", Run: run, Until: "b"}}, "step a: its background part ends by b, which is not a step after it"},
		{[]Step{{Name: "b", Run: run}, {Name: "a", Run: run, Until: "b"}}, "step a: its background part ends by b, which is not a step after it"},
		{[]Step{{Name: "a", Run: run, Until: "b"}, {Name: "b", Plan: mk}}, ""},
	} {
		err := checkSteps(c.steps)
		if got := fmt.Sprint(err); c.err == "" && err != nil || c.err != "" && got != c.err {
			t.Errorf("%s: %v", stepNames(c.steps), err)
		}
	}
	ran := false
	if _, err := runSteps(context.Background(), runOptions{}, nil, []Step{{Name: "a", Run: func(context.Context, *plan) error { ran = true; return nil }}, {Name: "b"}}); err == nil || ran {
		t.Errorf("a list with a step of no work ran (%v, %v)", ran, err)
	}
}

// A resuming step gets its part of the run's journal: hosts begun and done under "STEP/HOST", read back
// by the next run; a dry run reads it and writes nothing; without a journal nothing is done.
func TestRunStepsProgress(t *testing.T) {
	j := statedir.NewJournal[struct{}](filepath.Join(t.TempDir(), "x.json"), "x", "", time.Now())
	boom := errors.New("boom")
	var did []string
	kill := true
	steps := []Step{{Name: "roll", Resume: func(_ context.Context, _ *plan, g progress) error {
		for _, h := range []string{"h1", "h2", "h3"} {
			if g.Done(h) {
				continue
			}
			if err := g.Begin(h); err != nil {
				return err
			}
			if h == "h2" && kill {
				return boom // killed while h2 is being changed
			}
			did = append(did, h)
			if err := g.Finish(h); err != nil {
				return err
			}
		}
		return g.Complete()
	}}}
	if _, err := runSteps(context.Background(), runOptions{Progress: j}, nil, steps); !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	if !slices.Equal(j.Done, []string{"roll/h1"}) || !slices.Equal(j.Current, []string{"h2"}) {
		t.Fatalf("done %v, under way %v", j.Done, j.Current)
	}
	var begun bool
	dry := []Step{{Name: "roll", Resume: func(_ context.Context, _ *plan, g progress) error {
		begun = g.Begun("h2") && g.Done("h1") && !g.Done("h2")
		return errors.Join(g.Begin("h3"), g.Finish("h2"), g.Complete())
	}}}
	dry[0].Dry = true
	if _, err := runSteps(context.Background(), runOptions{Progress: j, DryRun: true}, nil, dry); err != nil || !begun {
		t.Fatalf("dry run: %v, saw h2 under way and h1 done: %v", err, begun)
	}
	if !slices.Equal(j.Done, []string{"roll/h1"}) || !slices.Equal(j.Current, []string{"h2"}) {
		t.Fatalf("a dry run wrote the journal: done %v, under way %v", j.Done, j.Current)
	}
	did, kill = nil, false
	if _, err := runSteps(context.Background(), runOptions{Progress: j}, nil, steps); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(did, []string{"h2", "h3"}) || !slices.Equal(j.Done, []string{"roll/h1", "roll/h2", "roll/h3", "roll"}) || len(j.Current) != 0 {
		t.Errorf("resumed: did %v, done %v, under way %v", did, j.Done, j.Current)
	}
	did = nil
	if _, err := runSteps(context.Background(), runOptions{}, nil, steps); err != nil || len(did) != 3 {
		t.Errorf("without a journal: did %v (%v)", did, err)
	}
}

// Steps that only read run before the run holds the lock; the others wait for it, and a lock another run
// holds stops the run before them. A step that finds nothing to do (itself a read) ends the run there,
// without an error; the run's end asks the lock once more as a run that changed nothing, which another
// run holding it still fails.
func TestRunStepsHeldAndSettled(t *testing.T) {
	var ran []string
	step := func(name string, reads bool, err error) Step {
		return Step{Name: name, Reads: reads, Run: func(context.Context, *plan) error { ran = append(ran, name); return err }}
	}
	held := func(err error) func(bool) error {
		return func(changes bool) error {
			if changes {
				ran = append(ran, "held")
			} else {
				ran = append(ran, "end")
			}
			return err
		}
	}
	refused := errors.New("another run holds the cluster's lock")

	_, err := runSteps(context.Background(), runOptions{Held: held(refused)}, &plan{}, []Step{step("facts", true, nil), step("push", false, nil)})
	if !errors.Is(err, refused) || !slices.Equal(ran, []string{"facts", "held"}) {
		t.Errorf("a lock held elsewhere: ran %v, error %v", ran, err)
	}

	ran = nil
	log := &eventLog{}
	timings, err := runSteps(context.Background(), runOptions{Sink: log, Held: held(nil)}, &plan{},
		[]Step{step("facts", true, nil), step("settled", true, errSettled), step("push", false, nil)})
	if err != nil || !slices.Equal(ran, []string{"facts", "settled", "end"}) || len(timings) != 2 {
		t.Errorf("a settled run: ran %v, %d timings, error %v", ran, len(timings), err)
	}
	for _, l := range log.lines() {
		if strings.Contains(l, "error=") {
			t.Errorf("a settled step reported as failed: %s", l)
		}
	}

	ran = nil
	_, err = runSteps(context.Background(), runOptions{Held: held(refused)}, &plan{},
		[]Step{step("facts", true, nil), step("settled", true, errSettled), step("push", false, nil)})
	if !errors.Is(err, refused) || !slices.Equal(ran, []string{"facts", "settled", "end"}) {
		t.Errorf("a settled run while another holds the lock: ran %v, error %v", ran, err)
	}

	ran = nil
	_, err = runSteps(context.Background(), runOptions{Held: held(nil)}, &plan{},
		[]Step{step("facts", true, nil), step("push", false, nil), step("ready", false, nil)})
	if err != nil || !slices.Equal(ran, []string{"facts", "held", "push", "held", "ready", "end"}) {
		t.Errorf("a run that changes: ran %v, error %v", ran, err)
	}
}
