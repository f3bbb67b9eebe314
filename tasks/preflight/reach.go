package preflight

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/scripts"
)

// Listen starts a short-lived TCP listener on the host at ip:port (with socat, python3 or perl, whichever
// the host has), waits until it listens, and returns the function that stops it. The listener also ends by
// itself after a minute, so that nothing is left behind if clusterctl is killed.
func Listen(ctx context.Context, h tasks.Runner, ip string, port int) (stop func(), err error) {
	script := scripts.Listen(ip, port)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := h.Run(lctx, script, nil)
		done <- err
	}()
	stop = func() {
		cancel()
		<-done //nolint:errcheck // the listener ends with the context: its error says only that
	}
	// Wait until the port is in LISTEN state (0A) in /proc/net/tcp{,6}.
	wait := scripts.ListenWait(port)
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if _, err := h.Run(waitCtx, wait, nil); err != nil {
		stop()
		select {
		case lerr := <-done:
			if lerr != nil {
				return nil, fmt.Errorf("%s: starting a test listener on %s:%d: %w", h.Name(), ip, port, lerr)
			}
		default:
		}
		return nil, fmt.Errorf("%s: the test listener on %s:%d did not start: %w", h.Name(), ip, port, err)
	}
	return stop, nil
}

// Probe connects from the host to ip:port and closes the connection at once.
func Probe(ctx context.Context, from tasks.Runner, ip string, port int) error {
	_, err := from.Run(ctx, ProbeCommand(ip, port), nil)
	if err != nil {
		return fmt.Errorf("%s cannot connect to %s:%d", from.Name(), ip, port)
	}
	return nil
}

// ProbeCommand is the command Probe runs: bash opens /dev/tcp/IP/PORT, with the address and port given as
// bash's positional arguments, never inside its script.
func ProbeCommand(ip string, port int) string { return scripts.Probe(ip, port) }
