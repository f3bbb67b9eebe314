// Package runlock keeps one mutating run at a time on a cluster: a file lock in the state directory (runs
// of one workstation, and runs before the cluster's API exists) and a Lease in kube-system (runs of every
// workstation and CI job), both naming their holder. A run that died releases the file lock with its
// process; its Lease is taken over once it expires, at once by a run of the same state directory (which
// knows, from the file lock it got, that the holder is gone), or with Force.
package runlock

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"
	"unicode"
)

// Holder is who holds the lock: a run, by its random ID, and what an operator needs to find it.
type Holder struct {
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// NewHolder is this process running command (as "certs rotate"), from now.
func NewHolder(command string) Holder {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	h := Holder{ID: hex.EncodeToString(b), PID: os.Getpid(), Command: command, Since: time.Now().UTC().Truncate(time.Second)}
	if u, err := user.Current(); err == nil {
		h.User = u.Username
	}
	h.Host, _ = os.Hostname()
	return h
}

// String names the holder for an operator: `certs rotate` by root@ws (pid 4242) since 17:05:01 UTC.
func (h Holder) String() string {
	return fmt.Sprintf("`%s` by %s@%s (pid %d) since %s", h.Command, h.User, h.Host, h.PID, h.Since.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// clean makes a holder read from a file or the API fit to print: printable, at most 100 runes per field.
func (h Holder) clean() Holder {
	for _, s := range []*string{&h.ID, &h.User, &h.Host, &h.Command} {
		*s = printable(*s, 100)
	}
	if h.PID < 0 {
		h.PID = 0
	}
	return h
}

func printable(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		if !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// ErrHeld is what a HeldError is (errors.Is): another run holds the lock.
var ErrHeld = errors.New("another run holds the cluster's lock")

// HeldError says who holds the lock, where, and what the operator can do.
type HeldError struct {
	Holder Holder
	// Where is "this state directory" (the file lock) or "the cluster" (the Lease).
	Where string
	// Renewed and Expires are the Lease's (zero for the file lock).
	Renewed, Expires time.Time
}

func (e *HeldError) Error() string {
	s := fmt.Sprintf("%s holds %s's lock", e.Holder, e.Where)
	if e.Expires.IsZero() {
		return s + ": wait for that run to end"
	}
	return s + fmt.Sprintf(" (renewed %s ago): wait for that run to end; if it is gone, its lock expires at %s, or --force-unlock takes it now",
		time.Since(e.Renewed).Round(time.Second), e.Expires.UTC().Format("15:04:05 UTC"))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }
