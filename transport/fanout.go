package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Status is how a play ended on one host, as Ansible's recap says it.
type Status string

// The statuses of a host in a play.
const (
	StatusOK          Status = "ok"
	StatusChanged     Status = "changed"
	StatusFailed      Status = "failed"
	StatusUnreachable Status = "unreachable"
	StatusSkipped     Status = "skipped" // not started: the play stopped first
	// StatusInterrupted: the run was interrupted (SIGINT, SIGTERM) while the host was being worked on.
	StatusInterrupted Status = "interrupted"
)

// ErrSkipped, returned by a play's function, marks the host skipped: nothing to do there, and no failure.
var ErrSkipped = errors.New("skipped")

// HostResult is one host's outcome in a play.
type HostResult struct {
	Host     string
	Status   Status
	Err      error
	Start    time.Time
	Duration time.Duration
}

// Policy says how many hosts a play works on at once and how many may fail.
type Policy struct {
	// Limit is the number of hosts worked on at once (--forks).
	Limit int
	// MaxFail is the fraction of hosts that may fail before the play stops starting new ones: 0 stops at the
	// first failure (control-plane plays), 0.1 tolerates one host in ten (worker plays).
	MaxFail float64
}

// Event is one thing that happened, for views: text, a live terminal, or JSON lines (--output json).
type Event struct {
	Time       time.Time `json:"time"`
	Type       string    `json:"type"` // play_start, host_start, host_done, play_done
	Play       string    `json:"play"`
	Host       string    `json:"host,omitempty"`
	Hosts      int       `json:"hosts,omitempty"` // play_start: how many hosts
	Status     Status    `json:"status,omitempty"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Error      string    `json:"error,omitempty"`
	// Message is progress in words (EventMessage): what a long wait is waiting for.
	Message string `json:"message,omitempty"`
}

// The event types.
const (
	EventPlayStart = "play_start"
	EventHostStart = "host_start"
	EventHostDone  = "host_done"
	EventPlayDone  = "play_done"
	EventMessage   = "message"
	// A playbook's phases (several plays, or work on the workstation or through the API) start and end.
	EventPhaseStart = "phase_start"
	EventPhaseDone  = "phase_done"
)

// Sink receives events; it is called from many goroutines and must not block for long.
type Sink interface{ Emit(Event) }

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// PlayError is a play that failed on more hosts than its policy allows.
type PlayError struct {
	Play    string
	Failed  []HostResult
	Skipped int
}

func (e *PlayError) Error() string {
	errs := make([]error, 0, len(e.Failed))
	for _, r := range e.Failed {
		errs = append(errs, r.Err)
	}
	msg := fmt.Sprintf("%s failed on %d host(s)", e.Play, len(e.Failed))
	if e.Skipped > 0 {
		msg += fmt.Sprintf("; %d host(s) not started", e.Skipped)
	}
	return msg + ":\n" + errors.Join(errs...).Error()
}

// Unwrap gives the hosts' errors to errors.Is and errors.As.
func (e *PlayError) Unwrap() []error {
	errs := make([]error, 0, len(e.Failed))
	for _, r := range e.Failed {
		errs = append(errs, r.Err)
	}
	return errs
}

// Fanout runs fn on every host, at most policy.Limit at once, and returns each host's result in the order
// given. fn reports whether it changed anything. Once more hosts failed than the policy tolerates, no new
// host is started (those are skipped) and the error is a *PlayError; failures within the tolerance are in
// the results only. A cancelled ctx stops starting hosts and ends with ctx's error.
func Fanout(ctx context.Context, play string, hosts []string, policy Policy, sink Sink,
	fn func(ctx context.Context, host string) (changed bool, err error)) ([]HostResult, error) {
	if sink == nil {
		sink = SinkFunc(func(Event) {})
	}
	limit := policy.Limit
	if limit < 1 {
		limit = 1
	}
	allowed := int(policy.MaxFail * float64(len(hosts)))
	results := make([]HostResult, len(hosts))
	for i, h := range hosts {
		results[i] = HostResult{Host: h, Status: StatusSkipped}
	}
	sink.Emit(Event{Time: time.Now(), Type: EventPlayStart, Play: play, Hosts: len(hosts)})
	start := time.Now()

	var mu sync.Mutex
	failed := 0
	stopped := false
	g := new(errgroup.Group)
	g.SetLimit(limit)
	for i, h := range hosts {
		mu.Lock()
		stop := stopped
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			mu.Lock()
			if stopped || ctx.Err() != nil {
				mu.Unlock()
				return nil
			}
			mu.Unlock()
			r := runHost(ctx, play, h, sink, fn)
			mu.Lock()
			results[i] = r
			if r.Err != nil && ctx.Err() == nil {
				failed++
				if failed > allowed {
					stopped = true
				}
			}
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	sink.Emit(Event{Time: time.Now(), Type: EventPlayDone, Play: play, Hosts: len(hosts), DurationMS: time.Since(start).Milliseconds()})
	if err := ctx.Err(); err != nil {
		return results, err
	}
	if failed > allowed {
		pe := &PlayError{Play: play}
		for _, r := range results {
			switch r.Status {
			case StatusFailed, StatusUnreachable:
				pe.Failed = append(pe.Failed, r)
			case StatusSkipped:
				pe.Skipped++
			}
		}
		return results, pe
	}
	return results, nil
}

// runHost runs fn on one host of a play, announced and timed; its result's status says how it ended (an
// error of ErrSkipped: skipped; of the connection: unreachable).
func runHost(ctx context.Context, play, h string, sink Sink, fn func(ctx context.Context, host string) (bool, error)) HostResult {
	r := HostResult{Host: h, Start: time.Now()}
	sink.Emit(Event{Time: r.Start, Type: EventHostStart, Play: play, Host: h})
	changed, err := fn(ctx, h)
	r.Duration = time.Since(r.Start)
	var de *DialError
	var hk *HostKeyError
	var le *LostError
	switch {
	case errors.Is(err, ErrSkipped):
		r.Status = StatusSkipped
	case err != nil && ctx.Err() != nil:
		r.Status, r.Err = StatusInterrupted, err
	case err != nil && (errors.As(err, &de) || errors.As(err, &hk) || errors.As(err, &le)):
		r.Status, r.Err = StatusUnreachable, err
	case err != nil:
		r.Status, r.Err = StatusFailed, err
	case changed:
		r.Status = StatusChanged
	default:
		r.Status = StatusOK
	}
	ev := Event{Time: time.Now(), Type: EventHostDone, Play: play, Host: h, Status: r.Status, DurationMS: r.Duration.Milliseconds()}
	if r.Err != nil && r.Status != StatusInterrupted { // the interruption is said once, for the whole run
		ev.Error = r.Err.Error()
	}
	sink.Emit(ev)
	return r
}
