package main

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
)

// -v and -vv logs are written as the progress lines are: a time of day, the level, the message, the
// attributes; never slog's time=... level=... format beside them.
func TestLogLines(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(newLineHandler(&b, slog.LevelDebug)).With("host", "cp1")
	log.WithGroup("ssh").Debug("dial failed, retrying", "attempt", 2, "err", "cannot connect: refused\x1b[2J")
	log.Info("connected")
	slog.New(newLineHandler(&b, slog.LevelInfo)).Debug("not shown")
	want := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} debug dial failed, retrying host=cp1 ssh\.attempt=2 ssh\.err="cannot connect: refused\\x1b\[2J"\n` +
		`\d\d:\d\d:\d\d\.\d{3} info connected host=cp1\n$`)
	if !want.MatchString(b.String()) {
		t.Errorf("log lines:\n%q", b.String())
	}
}
