// Package reboot is what clusterctl asks a host when it reboots it: whether the host says it needs a
// reboot, which boot it is in, and the reboot itself. Every command is fixed text: nothing of the inventory
// or of the host is pasted into one, and what a host answers is validated before it is used.
package reboot

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/transport"
)

// StateCommand prints the host's boot ID (a new one at every boot), then why it needs a reboot, or
// nothing: /run/reboot-required (Debian and Ubuntu's update-notifier and unattended-upgrades write it), or
// needs-restarting -r (the RHEL family's dnf-utils: exit 1 when the kernel, glibc, systemd or another
// core package was updated since the boot).
const StateCommand = `cat /proc/sys/kernel/random/boot_id
if [ -e /run/reboot-required ]; then
  echo reboot-required
elif command -v needs-restarting >/dev/null 2>&1; then
  needs-restarting -r >/dev/null 2>&1; rc=$?
  [ "$rc" -ne 1 ] || echo needs-restarting
fi
true`

// Command asks systemd to reboot the host without waiting for it: the SSH session may end before the
// command returns, as sshd stops.
const Command = "systemctl --no-block reboot"

// State is what a host said of itself.
type State struct {
	// BootID is the kernel's boot ID: a new one means the host booted again.
	BootID string
	// Needs is why the host asks for a reboot ("reboot-required", "needs-restarting"), or "".
	Needs string
}

var bootIDRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// maxOutput bounds what ParseState reads: a boot ID and one word.
const maxOutput = 256

// ParseState reads StateCommand's output.
func ParseState(out string) (State, error) {
	if len(out) > maxOutput {
		return State{}, fmt.Errorf("the host's boot state is %d bytes, more than the %d expected", len(out), maxOutput)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s State
	s.BootID = strings.TrimSpace(lines[0])
	if !bootIDRE.MatchString(s.BootID) {
		return State{}, fmt.Errorf("the host's boot ID %q is not a UUID (/proc/sys/kernel/random/boot_id)", s.BootID)
	}
	switch len(lines) {
	case 1:
	case 2:
		switch w := strings.TrimSpace(lines[1]); w {
		case "reboot-required", "needs-restarting":
			s.Needs = w
		default:
			return State{}, fmt.Errorf("the host's reboot state %q is neither reboot-required nor needs-restarting", w)
		}
	default:
		return State{}, fmt.Errorf("the host's boot state has %d lines, want the boot ID and at most one more", len(lines))
	}
	return s, nil
}

// Batches cuts hosts into batches of at most n, in order.
func Batches[T any](hosts []T, n int) [][]T {
	if n < 1 {
		n = 1
	}
	var out [][]T
	for len(hosts) > 0 {
		k := min(n, len(hosts))
		out = append(out, hosts[:k])
		hosts = hosts[k:]
	}
	return out
}

// ReadState asks a host its boot ID and whether it asks for a reboot (StateCommand, ParseState).
func ReadState(ctx context.Context, h tasks.Runner) (State, error) {
	res, err := h.Run(ctx, StateCommand, nil)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", h.Name(), err)
	}
	s, err := ParseState(string(res.Stdout))
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", h.Name(), err)
	}
	return s, nil
}

// Reboot asks a host's systemd to reboot it without waiting (Command). The session ending under it, as
// sshd stops, is the reboot under way, not an error; the command refused is.
func Reboot(ctx context.Context, h tasks.Runner) error {
	_, err := h.Run(ctx, Command, nil)
	var ce *transport.CommandError
	if errors.As(err, &ce) && ce.ExitCode > 0 {
		return fmt.Errorf("%s: %w", h.Name(), err)
	}
	return ctx.Err()
}
