// Command clusterctl builds and operates Kubernetes clusters over SSH from one workstation.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Set at link time by the Makefile (-ldflags -X).
var (
	version = "dev"
	commit  = "unknown"
)

// Exit codes, documented in the README and docs/cli.md.
const (
	exitOK          = 0
	exitFailed      = 1   // the operation failed on some host
	exitUsage       = 2   // bad usage or bad inventory
	exitInterrupted = 130 // SIGINT or SIGTERM
)

// interruptGrace is how long an interrupted run has to end by itself (its remote commands are signalled at
// once) before the process exits anyway: CPU-bound work such as reading a huge inventory does not wait for
// a context.
const interruptGrace = time.Second

func main() {
	rest.SetDefaultWarningHandler(&apiWarnings{out: os.Stderr, seen: map[string]bool{}})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan int, 1)
	go func() { done <- run(ctx, os.Args[1:], os.Stdout, os.Stderr) }()
	select {
	case code := <-done:
		stop()
		os.Exit(code)
	case <-ctx.Done():
	}
	select {
	case code := <-done:
		os.Exit(code)
	case <-time.After(interruptGrace):
		fmt.Fprintln(os.Stderr, "clusterctl: "+interrupted)
		os.Exit(exitInterrupted)
	}
}

// apiWarnings says each of the API server's warnings (a deprecated API, Pod Security's "would violate")
// once, in clusterctl's words, where client-go would log them in its own format.
type apiWarnings struct {
	mu   sync.Mutex
	out  io.Writer
	seen map[string]bool
}

func (w *apiWarnings) HandleWarningHeader(code int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if code != 299 || text == "" || w.seen[text] {
		return
	}
	w.seen[text] = true
	fmt.Fprintf(w.out, "clusterctl: warning from the API server: %s\n", text)
}

// run executes one command line and returns the exit code; the error, if any, is printed here and only here.
// A panic is a bug: it is reported with its stack and exits 1, never 2 (which says the input was wrong).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "clusterctl: internal error (a bug in clusterctl; please report it with this output): %v\n%s", p, debug.Stack())
			code = exitFailed
		}
	}()
	out := &countingWriter{w: stdout}
	root := newRootCmd(out, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code = exitCode(ctx, err)
	defer func() {
		// -o json: a command that stopped before its result line (a bad inventory, a bad flag, hosts it
		// could not reach) still ends stdout with one, so that a caller reading JSON always gets the error
		if f := root.PersistentFlags().Lookup("output"); f != nil && f.Value.String() == "json" && !out.ended {
			status := map[int]string{exitUsage: "invalid", exitInterrupted: "interrupted"}[code]
			if status == "" {
				status = "failed"
			}
			_ = writeJSONLine(stdout, map[string]any{"type": "error", "status": status, "error": escapeText(err.Error()), "exitCode": code})
		}
	}()
	if isCobraUsage(err) {
		// cobra's own messages do not say which command they are about.
		c, _, findErr := root.Find(args)
		if findErr != nil {
			c = root
		}
		if c != root && !strings.Contains(err.Error(), c.CommandPath()) {
			err = fmt.Errorf("%s: %w", strings.TrimPrefix(c.CommandPath(), root.Name()+" "), err)
		}
		err = fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	}
	switch {
	case code == exitInterrupted:
		fmt.Fprintln(stderr, "clusterctl: "+interrupted)
	case !errors.Is(err, errReported):
		fmt.Fprintf(stderr, "clusterctl: %s\n", escapeText(err.Error()))
	}
	return code
}

// interrupted is what an interrupted run says, true of every command: files on the hosts and in the state
// directory are replaced whole (a temporary file, synced, renamed) or not at all, and each run finds what
// is left to do (from the hosts, or from its journal).
const interrupted = "interrupted; nothing is left half-written; run the same command again to finish"

// exitError carries the exit code an error should produce.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errReported is wrapped by errors whose details were already printed by the command's view.
var errReported = errors.New("reported")

func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// flagError is a flag cobra could not parse (unknown, missing its value, a value of the wrong kind).
type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

// isCobraUsage recognizes the usage errors cobra makes itself (bad flags, unknown commands, wrong argument
// counts, required flags missing, flags given together that exclude each other).
func isCobraUsage(err error) bool {
	if errors.As(err, new(flagError)) {
		return true
	}
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "invalid argument",
		"required flag", "if any flags in the group", "at least one of the flags"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

func exitCode(ctx context.Context, err error) int {
	var ee *exitError
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &ee):
		return ee.code
	case isCobraUsage(err), errors.Is(err, pull.ErrUnsafeDir), errors.Is(err, statedir.ErrUntrusted):
		return exitUsage
	default:
		return exitFailed
	}
}

// countingWriter counts what is written through it, and knows whether the last line was a command's
// result (writeReport, writeResultLine).
type countingWriter struct {
	w     io.Writer
	n     int
	ended bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	c.ended = false
	return n, err
}

// endedWith writes a command's result line and marks stdout as ended with it.
func endedWith(w io.Writer, line []byte) error {
	_, err := w.Write(line)
	if c, ok := w.(*countingWriter); ok && err == nil {
		c.ended = true
	}
	return err
}
