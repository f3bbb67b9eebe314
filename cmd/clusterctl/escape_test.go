package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/transport"
)

// What hosts send reaches the terminal with every control character but newline and tab escaped.
func TestEscapeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\n\ttext, ünïcode":         "plain\n\ttext, ünïcode",
		"\x1b]0;owned\a\x1b[2J":          `\x1b]0;owned\x07\x1b[2J`,
		"progress\roverwritten":          `progress\x0doverwritten`,
		"back\bspace\x7f":                `back\x08space\x7f`,
		"\u009b31m C1 CSI":               `\u009b31m C1 CSI`,
		"evil\u202egnp.exe":              `evil\u202egnp.exe`,
		"bad \xff byte, real \uFFFD one": `bad \xff byte, real ` + "\uFFFD" + ` one`,
	} {
		if got := escapeText(in); got != want {
			t.Errorf("escapeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// exec's text output and the event view (hooks' output, errors with a host's stderr) escape them.
func TestHostOutputEscaped(t *testing.T) {
	got := execText(&execResult{Host: "w1", Status: transport.StatusChanged, Stdout: "ok\x1b[31m red\n", Stderr: "\x1b]52;c;Y3VybA==\a"})
	if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `ok\x1b[31m red`) {
		t.Errorf("exec output %q", got)
	}
	for _, mode := range []string{"plain", "tty"} {
		var b bytes.Buffer
		v := newEventView(&b, "text")
		v.mode = mode
		v.Emit(transport.Event{Type: transport.EventMessage, Play: "hooks", Host: "w1", Message: "hook said \x1b[2J\x1b[H", Time: time.Now()})
		v.Emit(transport.Event{Type: transport.EventPlayStart, Play: "p", Hosts: 1, Time: time.Now()})
		v.Emit(transport.Event{Type: transport.EventHostDone, Play: "p", Host: "w1", Status: transport.StatusFailed, Error: "stderr: \x1b]0;title\a", Time: time.Now()})
		if out := b.String(); strings.Contains(strings.ReplaceAll(out, "\r\033[K", ""), "\x1b") || strings.Contains(out, "\a") {
			t.Errorf("%s view wrote a host's control characters: %q", mode, out)
		}
	}
}
