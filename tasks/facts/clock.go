package facts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/tasks"
)

// SkewReported is the smallest difference between a host's clock and the workstation's that preflight
// reports (a warning; its --max-clock-skew, an error).
const SkewReported = time.Second

// GatherFacts learns everything preflight and the steps need about a host in one command (ask: what the
// preflight checks look for): the host costs one round trip. The script prints the host's clock first, in
// one write: it was read between the call and the arrival of the first output, and half that window bounds
// the skew's error. Where the window is too wide for that (a slow host) and the reading cannot tell whether
// the skew is above tell (the smallest the caller reports), readClock reads it again in exchanges that do
// nothing else; a reading that can tell is kept (on twenty hosts at once on two cores, every window is
// wider than clockGoodRTT, and a clock read again cost each host a session).
func GatherFacts(ctx context.Context, h tasks.Runner, criSocket string, askCRI bool, ask Ask, tell time.Duration) (*Facts, error) {
	sent := time.Now()
	// The script goes to sh on stdin: whatever the login shell is, a POSIX sh runs it (dash reads /proc
	// an order of magnitude faster than bash does).
	res, err := h.Run(ctx, "sh -s", []byte(factsScript(criSocket, askCRI, ask)))
	if err != nil {
		return nil, err
	}
	f, err := ParseFacts(h.Name(), res.Stdout)
	if err != nil {
		return nil, err
	}
	if window := res.FirstStdout.Sub(sent); !res.FirstStdout.IsZero() && !f.Clock.IsZero() && window >= 0 {
		f.ClockSkew, f.ClockUncertainty = f.Clock.Sub(sent.Add(window/2)), window/2
		if window < clockGoodRTT || f.ClockSkew.Abs()+f.ClockUncertainty <= tell {
			return f, nil
		}
	}
	if err := readClock(ctx, h, f); err != nil {
		return nil, err
	}
	return f, nil
}

// clockReads is how many times readClock asks at most; it stops earlier once a round trip is under
// clockGoodRTT (an uncertainty of ±250 ms, a quarter of the smallest skew preflight reports).
const (
	clockReads   = 3
	clockGoodRTT = 500 * time.Millisecond
)

// readClock reads the host's clock with a command that does nothing else, and keeps the reading of the
// shortest round trip: the skew is the host's reading minus the round trip's midpoint, and half the round
// trip bounds its error. (Read within the facts script, the skew was off by half of a round trip of many
// seconds on a slow host.)
func readClock(ctx context.Context, h tasks.Runner, f *Facts) error {
	best := time.Duration(-1)
	for range clockReads {
		sent := time.Now()
		res, err := h.Run(ctx, "date +%s.%N", nil)
		rtt := time.Since(sent)
		if err != nil {
			return err
		}
		clock := parseEpoch(strings.TrimSpace(string(res.Stdout)))
		if clock.IsZero() {
			return fmt.Errorf("%s: date +%%s.%%N printed %q, not a time", h.Name(), bounded(res.Stdout, 64))
		}
		if best < 0 || rtt < best {
			best = rtt
			f.Clock = clock
			f.ClockSkew = clock.Sub(sent.Add(rtt / 2))
			f.ClockUncertainty = rtt / 2
		}
		if rtt < clockGoodRTT {
			break
		}
	}
	return nil
}
