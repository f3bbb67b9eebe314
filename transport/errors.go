// Package transport reaches hosts over SSH: one connection per host, reused for commands and SFTP, with host
// keys verified, bastion chains, sudo, keepalives, timeouts, retries that know which errors are final, atomic
// uploads that skip unchanged content, and a bounded fan-out over many hosts.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// CommandError is a remote command that ran and failed.
type CommandError struct {
	Host     string
	Command  string
	ExitCode int // -1 when the command was killed by a signal or the session ended without a status
	Signal   string
	Stderr   string
}

func (e *CommandError) Error() string {
	status := fmt.Sprintf("exit status %d", e.ExitCode)
	if e.Signal != "" {
		status = "killed by signal " + e.Signal
	}
	msg := fmt.Sprintf("%s: command %q failed: %s", e.Host, shortCommand(e.Command), status)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + tail(s, 2000)
	}
	return msg
}

// LostError is an operation that failed because the connection to its host was lost in the middle of it:
// the host or its sshd went away, or the network stopped carrying packets (keepalives unanswered). The host
// is unreachable, as one that cannot be dialed is; what was being written was never renamed into place.
type LostError struct {
	Host    string
	Address string
	Cause   error // why the connection ended
	Err     error // what the operation reported (nil: no operation, see Conn.Lost)
}

func (e *LostError) Error() string {
	msg := fmt.Sprintf("%s: unreachable: the connection to %s was lost (%v)", e.Host, e.Address, e.Cause)
	if e.Err != nil {
		msg += "; " + strings.TrimPrefix(e.Err.Error(), e.Host+": ")
	}
	return msg
}

func (e *LostError) Unwrap() error { return e.Err }

// DialError is a host that could not be reached or logged into. Retryable says whether trying again can help.
type DialError struct {
	Host    string
	Address string
	Err     error
	// Tries and Took, when it was tried more than once: how many times, in how long.
	Tries int
	Took  time.Duration
}

func (e *DialError) Error() string {
	msg := fmt.Sprintf("%s: cannot connect to %s: %v", e.Host, e.Address, plainNetError(e.Err))
	if e.Tries > 1 {
		msg += fmt.Sprintf(" (%d tries in %s; --connect-timeout bounds each)", e.Tries, e.Took.Round(100*time.Millisecond))
	}
	return msg
}

// plainNetError is a network error without what the message already says (dial tcp ADDR: ...): the
// system's own words, such as "connection refused".
func plainNetError(err error) error {
	if cause, ok := DialCause(err); ok {
		return cause
	}
	return err
}

// DialCause is why a dial failed in the system's own words ("connection refused", "no route to host"),
// without the addresses net.OpError repeats; ok is false when err is no failed dial.
func DialCause(err error) (cause error, ok bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || op.Err == nil {
		return nil, false
	}
	var sys *os.SyscallError
	if errors.As(op.Err, &sys) {
		return sys.Err, true
	}
	return op.Err, true
}

func (e *DialError) Unwrap() error { return e.Err }

// HostKeyError is a host that offered a key other than the one expected. It is final: a retry cannot make
// a changed key right, and connecting anyway would hand credentials to whoever answers.
type HostKeyError struct {
	Host     string
	Address  string
	Offered  string   // SHA256 fingerprint and type of the key the host offered (of each, when asked for several types)
	Expected []string // fingerprints and where each was found (known_hosts file:line, or the inventory pin)
	Unknown  bool     // no key is known for the host at all
	Hint     string
}

func (e *HostKeyError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("%s: host key of %s is not known (offered %s); %s", e.Host, e.Address, e.Offered, e.Hint)
	}
	return fmt.Sprintf("%s: HOST KEY MISMATCH for %s: offered %s, expected %s; %s", e.Host, e.Address, e.Offered,
		strings.Join(e.Expected, " or "), e.Hint)
}

// ErrAuth is wrapped by errors of hosts that refused every credential offered.
var ErrAuth = errors.New("authentication failed")

// Retryable says whether an error of dialling or running may go away by trying again. Host-key errors, DNS
// names that do not resolve and cancellation are final. An authentication failure is retried: sshd on a
// freshly booted host can answer before the authorized keys are in place.
func Retryable(err error) bool {
	var hk *HostKeyError
	var dns *net.DNSError
	switch {
	case err == nil:
		return false
	case errors.As(err, &hk):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &dns):
		return dns.IsTemporary || dns.IsTimeout
	case errors.Is(err, ErrAuth):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ETIMEDOUT):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// The handshake was cut (EOF) or the connection dropped mid-way: worth another try.
	return strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// shortCommand keeps error messages readable when the command is a whole script: its first line, cut.
func shortCommand(c string) string {
	line, rest, multi := strings.Cut(c, "\n")
	if len(line) > 100 {
		line, multi = line[:100], true
	}
	if multi || rest != "" {
		return line + " …"
	}
	return line
}
