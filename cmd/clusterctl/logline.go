package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// lineHandler writes -v and -vv logs as the progress lines are written: "15:04:05.000 debug MESSAGE
// key=value ...", one line each, values quoted when they hold spaces or quotes, control characters
// escaped (a log line may carry a host's words).
type lineHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Leveler
	attrs string // attributes of With, already formatted
	group string
}

func newLineHandler(w io.Writer, level slog.Leveler) *lineHandler {
	return &lineHandler{mu: &sync.Mutex{}, w: w, level: level}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.Format("15:04:05.000"))
	b.WriteByte(' ')
	b.WriteString(strings.ToLower(r.Level.String()))
	b.WriteByte(' ')
	b.WriteString(escapeText(r.Message))
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range attrs {
		writeAttr(&b, h.group, a)
	}
	c := *h
	c.attrs += b.String()
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group += name + "."
	return &c
}

// writeAttr writes " key=value", a group's attributes each under the group's name.
func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			writeAttr(b, group+a.Key+".", g)
		}
		return
	}
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \"=") {
		v = strconv.Quote(v)
	}
	fmt.Fprintf(b, " %s%s=%s", group, a.Key, escapeText(v))
}
