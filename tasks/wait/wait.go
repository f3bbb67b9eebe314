// Package wait polls for a condition, as every wait of clusterctl does: the API server ready, nodes Ready,
// static Pods current, a rollout done, a drain finished.
package wait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Check says whether the wait is over and, if not, what it is waiting for. An error ends the wait, but one
// that trying again may cure (Transient) is retried until the wait's deadline.
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
// waiting for WHAT"). A transient error of the check (the API server restarting, a request timing out, a
// 5xx or 429 answer) is retried, and named when the wait gives up; any other ends the wait at once.
func Poll(ctx context.Context, o Options, check Check) error {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.ReportEvery == 0 {
		o.ReportEvery = 10 * time.Second
	}
	deadline := time.Now().Add(o.Timeout)
	lastReport := time.Now()
	waiting := "the first check to succeed"
	var lastErr error
	for {
		done, w, err := check()
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case err != nil && !Transient(err):
			return err
		case err != nil:
			lastErr = err
		case done:
			return nil
		default:
			waiting, lastErr = w, nil
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("after %s, still waiting for %s; the last check failed: %w", o.Timeout, waiting, lastErr)
			}
			return fmt.Errorf("after %s, still waiting for %s", o.Timeout, waiting)
		}
		if o.Report != nil && time.Since(lastReport) >= o.ReportEvery {
			lastReport = time.Now()
			if lastErr != nil {
				o.Report(fmt.Sprintf("%s (retrying: %v)", waiting, lastErr))
			} else {
				o.Report(waiting)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Interval):
		}
	}
}

// Transient says whether an error of a check may go away by itself: the API server unreachable for a
// while (connection refused or reset, its connection lost, the SSH tunnel to it refused), a request that
// timed out, an answer of 429 or 5xx. Cancellation of the caller's context is not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == http.StatusTooManyRequests || code >= 500 || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	msg := err.Error()
	for _, s := range transientMessages {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// transientMessages are what errors that carry no type say when the API server went away for a moment.
var transientMessages = []string{
	"connection refused", "connection reset by peer", "http2: client connection lost", "http2: server sent GOAWAY",
	"Client.Timeout exceeded", "TLS handshake timeout", "i/o timeout", "use of closed network connection",
	// The API server's port closed on the host the SSH tunnel goes through.
	"ssh: rejected: connect failed",
}

// Retry calls fn until it succeeds, fails with an error that is not transient, the context ends or the
// timeout passes: one API request (or a few) that an API server restarting must not fail. what names it.
func Retry(ctx context.Context, timeout time.Duration, what string, fn func() error) error {
	return Poll(ctx, Options{Timeout: timeout}, func() (bool, string, error) {
		err := fn()
		return err == nil, what, err
	})
}
