// Package wait polls for a condition, as every wait of clusterctl does: the API server ready, nodes Ready,
// static Pods current, a rollout done, a drain finished.
package wait

import (
	"context"
	"fmt"
	"time"
)

// Check says whether the wait is over and, if not, what it is waiting for. An error ends the wait.
type Check func() (done bool, waiting string, err error)

// Options shape a wait.
type Options struct {
	Timeout time.Duration
	// Interval between checks (1 s by default); Report every ReportEvery (10 s by default) with what is
	// still awaited.
	Interval, ReportEvery time.Duration
	Report                func(waiting string)
}

// Poll calls check until it is done, the context ends or the timeout passes ("after TIMEOUT, still
// waiting for WHAT").
func Poll(ctx context.Context, o Options, check Check) error {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.ReportEvery == 0 {
		o.ReportEvery = 10 * time.Second
	}
	deadline := time.Now().Add(o.Timeout)
	lastReport := time.Now()
	for {
		done, waiting, err := check()
		if err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, still waiting for %s", o.Timeout, waiting)
		}
		if o.Report != nil && time.Since(lastReport) >= o.ReportEvery {
			lastReport = time.Now()
			o.Report(waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Interval):
		}
	}
}
