// Package hooks runs the inventory author's commands (inventory.Hook) on a host, around clusterctl's work.
// The command is the author's on purpose; clusterctl adds nothing to it but three environment variables,
// each quoted: CLUSTERCTL_HOST (the inventory name), CLUSTERCTL_COMMAND (up, add-node, remove-node,
// upgrade, reboot, reset) and CLUSTERCTL_HOOK (before, after).
package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/transport"
)

// Point is where a hook runs: a command and before or after.
type Point struct {
	Command string // inventory.HookUp, ...
	When    string // "before" or "after"
}

func (p Point) String() string { return p.Command + "." + p.When }

// Result is how one hook ended.
type Result struct {
	Hook     inventory.Hook
	Output   string // its stdout and stderr, the last maxOutput bytes of each
	Duration time.Duration
	Err      error // non-nil: it failed (exit status and stderr in the message)
}

// maxOutput bounds the output kept of each stream (a hook that prints a lot is shown by its end).
const maxOutput = 4 << 10

// Line is the command line that runs hook at p on host: the environment, then sh -c with the command,
// every part through transport.ShellQuote.
func Line(host string, p Point, hook inventory.Hook) string {
	return strings.Join([]string{"env",
		transport.ShellQuote("CLUSTERCTL_HOST=" + host),
		transport.ShellQuote("CLUSTERCTL_COMMAND=" + p.Command),
		transport.ShellQuote("CLUSTERCTL_HOOK=" + p.When),
		"sh", "-c", transport.ShellQuote(hook.Run)}, " ")
}

// Run runs the hooks in order on r (its connection's user and become); it stops at the first that fails
// with the stop policy and returns that error, naming the host, the point, the command and its stderr.
// A failure of a continue hook is in its Result only.
func Run(ctx context.Context, r tasks.Runner, p Point, list []inventory.Hook) ([]Result, error) {
	var out []Result
	for _, hk := range list {
		start := time.Now()
		res, err := r.Run(ctx, Line(r.Name(), p, hk), nil)
		one := Result{Hook: hk, Duration: time.Since(start), Output: tail(res.Stdout) + tail(res.Stderr)}
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			var ce *transport.CommandError
			if errors.As(err, &ce) {
				err = fmt.Errorf("exit status %d: %s", ce.ExitCode, strings.TrimSpace(tail([]byte(ce.Stderr))))
			}
			one.Err = fmt.Errorf("%s: hook %s %q failed: %w", r.Name(), p, hk.Run, err)
		}
		out = append(out, one)
		if one.Err != nil && hk.OnFailure != inventory.HookContinue {
			return out, one.Err
		}
	}
	return out, nil
}

func tail(b []byte) string {
	if len(b) > maxOutput {
		b = b[len(b)-maxOutput:]
	}
	return string(b)
}
