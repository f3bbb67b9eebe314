package transport

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"
)

// What -vv logs of each command and upload: its host (the connection's logger), what it was, how long it
// took. A command is named without its data: a script on stdin by its first line (the fixed comment each of
// clusterctl's scripts opens with), any other command by its program.

// maxLabel bounds a command's name in the log.
const maxLabel = 72

// commandLabel names a command for the log.
func commandLabel(command string, stdin []byte) string {
	if command == "sh -s" {
		first, _, _ := bytes.Cut(stdin, []byte("\n"))
		if bytes.HasPrefix(first, []byte("# ")) {
			return "sh -s: " + truncate(string(first), maxLabel)
		}
		return "sh -s"
	}
	fields := strings.Fields(command)
	if len(fields) == 0 {
		return ""
	}
	program := fields[0]
	if name, _, ok := strings.Cut(program, "="); ok {
		program = name + "=…" // an environment variable's value is data
	}
	return truncate(program, maxLabel)
}

// truncate cuts s to at most n bytes, at a character's start.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// logRan logs a command that ended: its exit code (-1: it did not end on its own; then also why), how long
// it took and, when it printed, how long until its first output.
func (c *Conn) logRan(ctx context.Context, command string, stdin []byte, start time.Time, res Result, err error) {
	if !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []any{"command", commandLabel(command, stdin), "took", time.Since(start).Round(time.Millisecond), "exit", res.ExitCode}
	if !res.FirstStdout.IsZero() {
		attrs = append(attrs, "first_output", res.FirstStdout.Sub(start).Round(time.Millisecond))
	}
	if err != nil && res.ExitCode <= 0 {
		attrs = append(attrs, "err", firstLineOf(err.Error()))
	}
	c.log.Debug("ran", attrs...)
}

// logPut logs an upload that ended: how many files, how many it wrote, how long it took.
func (c *Conn) logPut(ctx context.Context, files []File, changed []bool, start time.Time, err error) {
	if !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	n := 0
	for _, ch := range changed {
		if ch {
			n++
		}
	}
	attrs := []any{"files", len(files), "changed", n, "took", time.Since(start).Round(time.Millisecond)}
	if err != nil {
		attrs = append(attrs, "err", firstLineOf(err.Error()))
	}
	c.log.Debug("put", attrs...)
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return truncate(line, 200)
}
