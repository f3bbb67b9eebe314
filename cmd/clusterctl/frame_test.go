package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/transport"
)

type frameResult struct {
	Done []string `json:"done"`
}

// The frame writes one result line (status, error, the result's fields) with --output json, the report
// only for a text run that succeeded, and makes the exit of a failure: exit 1 by default, the command's
// own when it says; a question not on a terminal is refused (exit 2) before the playbook runs.
func TestChangeFrame(t *testing.T) {
	boom := errors.New("boom on w1")
	for _, tc := range []struct {
		name, output string
		err          error
		ask          *question
		failed       func(*frameResult, error) error
		wantOut      string
		wantCode     int
		ran          bool
	}{
		{name: "text ok", output: "text", wantOut: "report: a\n", ran: true},
		{name: "json ok", output: "json", wantOut: `{"type":"x_result","status":"ok","done":["a"],`, ran: true},
		{name: "json failed", output: "json", err: boom, wantOut: `{"type":"x_result","status":"failed","error":"boom on w1","done":["a"],`, wantCode: exitFailed, ran: true},
		{name: "text failed", output: "text", err: boom, wantCode: exitFailed, ran: true},
		{name: "own exit", output: "text", err: boom, failed: func(*frameResult, error) error { return &exitError{code: exitUsage, err: errReported} }, wantCode: exitUsage, ran: true},
		{name: "asked, no terminal", output: "text", ask: &question{what: "x destroys", ask: "go on? "}, wantCode: exitUsage},
		{name: "asked, --yes", output: "text", ask: &question{what: "x destroys", ask: "go on? ", skip: true}, wantOut: "report: a\n", ran: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			g := &globalOptions{Output: tc.output, stdout: &out, stderr: io.Discard}
			ran := false
			err := change[frameResult]{g: g, view: newEventView(io.Discard, tc.output), result: "x_result", ask: tc.ask, failed: tc.failed,
				play: func(context.Context) (*frameResult, error) {
					ran = true
					return &frameResult{Done: []string{"a"}}, tc.err
				},
				report: func(w io.Writer, res *frameResult, _ time.Duration) {
					_, _ = io.WriteString(w, "report: "+strings.Join(res.Done, ",")+"\n")
				},
			}.run(context.Background())
			if ran != tc.ran {
				t.Errorf("played %v, want %v", ran, tc.ran)
			}
			code := 0
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
			} else if err != nil {
				code = -1
			}
			if code != tc.wantCode {
				t.Errorf("exit %d (%v), want %d", code, err, tc.wantCode)
			}
			if !strings.HasPrefix(out.String(), tc.wantOut) || tc.wantOut == "" && out.Len() > 0 {
				t.Errorf("stdout %q, want %q", out.String(), tc.wantOut)
			}
			if tc.output == "json" && !json.Valid(out.Bytes()) {
				t.Errorf("not one JSON line: %q", out.String())
			}
		})
	}
}

// The recap lists hosts in the inventory's order, whatever order they finished in.
func TestRecapInInventoryOrder(t *testing.T) {
	var b strings.Builder
	v := newEventView(&b, "text")
	v.inventoryOrder(&inventory.Inventory{Hosts: []inventory.Host{{Name: "cp1"}, {Name: "w1"}, {Name: "w2"}}})
	for _, h := range []string{"w2", "cp1", "w1"} {
		v.Emit(transport.Event{Type: transport.EventHostDone, Play: "facts", Host: h, Status: transport.StatusOK})
	}
	v.Recap()
	out := b.String()
	if i, j, k := strings.Index(out, "  cp1 "), strings.Index(out, "  w1 "), strings.Index(out, "  w2 "); i < 0 || i > j || j > k {
		t.Errorf("recap:\n%s", out)
	}
}
