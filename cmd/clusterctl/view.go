package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/transport"
)

// eventView renders play events: JSON lines with --output json; on a terminal, one live status line per
// play (hosts done, running, failed) with failures printed as they happen; otherwise plain timestamped lines.
type eventView struct {
	mu     sync.Mutex
	w      io.Writer
	mode   string // json, tty, plain
	plays  map[string]*playState
	recap  map[string]*hostRecap
	order  []string
	ranks  map[string]int // each host's place in the inventory: the recap's order
	live   bool           // a status line is on screen
	enc    *json.Encoder
	timing []playTiming
}

type playState struct {
	total, done, failed int
	running             map[string]bool
	start               time.Time
}

type hostRecap struct {
	counts   map[transport.Status]int
	duration time.Duration
}

type playTiming struct {
	Play     string `json:"play"`
	Hosts    int    `json:"hosts"`
	Duration int64  `json:"duration_ms"`
}

func newEventView(w io.Writer, output string) *eventView {
	v := &eventView{w: w, plays: map[string]*playState{}, recap: map[string]*hostRecap{}}
	switch {
	case output == "json":
		v.mode = "json"
		v.enc = json.NewEncoder(w)
	case isTerminal(w):
		v.mode = "tty"
	default:
		v.mode = "plain"
	}
	return v
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Emit implements transport.Sink.
func (v *eventView) Emit(e transport.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.Type == transport.EventHostDone {
		r := v.recap[e.Host]
		if r == nil {
			r = &hostRecap{counts: map[transport.Status]int{}}
			v.recap[e.Host] = r
			v.order = append(v.order, e.Host)
		}
		r.counts[e.Status]++
		r.duration += time.Duration(e.DurationMS) * time.Millisecond
	}
	if e.Type == transport.EventPlayDone {
		v.timing = append(v.timing, playTiming{Play: e.Play, Hosts: e.Hosts, Duration: e.DurationMS})
	}
	if (e.Type == transport.EventPlayStart || e.Type == transport.EventPlayDone) && e.Hosts == 0 && v.mode != "json" {
		return // a play left with no host (every one failed before it) did nothing: "0 host(s), ok" would mislead
	}
	switch v.mode {
	case "json":
		_ = v.enc.Encode(e)
	case "plain":
		v.plain(e)
	default:
		v.tty(e)
	}
}

func (v *eventView) plain(e transport.Event) {
	ts := e.Time.Format("15:04:05.000")
	switch e.Type {
	case transport.EventPlayStart:
		fmt.Fprintf(v.w, "%s play %s: %d host(s)\n", ts, e.Play, e.Hosts)
	case transport.EventHostDone:
		line := fmt.Sprintf("%s %s %s: %s (%dms)", ts, e.Play, e.Host, e.Status, e.DurationMS)
		if e.Error != "" {
			line += ": " + escapeText(firstLine(hostless(e.Host, e.Error)))
		}
		fmt.Fprintln(v.w, line)
	case transport.EventPlayDone:
		fmt.Fprintf(v.w, "%s play %s done in %dms\n", ts, e.Play, e.DurationMS)
	case transport.EventMessage:
		fmt.Fprintf(v.w, "%s %s: %s\n", ts, prefix(e), escapeText(e.Message))
	case transport.EventPhaseStart:
		fmt.Fprintf(v.w, "%s phase %s\n", ts, e.Play)
	case transport.EventPhaseDone:
		line := fmt.Sprintf("%s phase %s done in %dms", ts, e.Play, e.DurationMS)
		if e.Error != "" {
			line += ": failed"
		}
		fmt.Fprintln(v.w, line)
	}
}

func (v *eventView) tty(e transport.Event) {
	p := v.plays[e.Play]
	switch e.Type {
	case transport.EventMessage:
		v.clearLine()
		fmt.Fprintf(v.w, "  %s: %s\n", prefix(e), escapeText(e.Message))
		return
	case transport.EventPhaseStart:
		v.clearLine()
		fmt.Fprintf(v.w, "== %s\n", e.Play)
		return
	case transport.EventPhaseDone:
		return
	case transport.EventPlayStart:
		p = &playState{total: e.Hosts, running: map[string]bool{}, start: e.Time}
		v.plays[e.Play] = p
	case transport.EventHostStart:
		if p != nil {
			p.running[e.Host] = true
		}
	case transport.EventHostDone:
		if p == nil {
			return
		}
		delete(p.running, e.Host)
		p.done++
		if e.Status == transport.StatusFailed || e.Status == transport.StatusUnreachable {
			p.failed++
			v.clearLine()
			fmt.Fprintf(v.w, "  %s %s: %s: %s\n", e.Play, e.Host, strings.ToUpper(string(e.Status)), escapeText(firstLine(hostless(e.Host, e.Error))))
		}
	case transport.EventPlayDone:
		v.clearLine()
		mark := "ok"
		if p != nil && p.failed > 0 {
			mark = fmt.Sprintf("%d failed", p.failed)
		}
		fmt.Fprintf(v.w, "%-24s %d host(s), %s, %s\n", e.Play, e.Hosts, mark, (time.Duration(e.DurationMS) * time.Millisecond).Round(time.Millisecond))
		delete(v.plays, e.Play)
		return
	}
	if p == nil {
		return
	}
	running := make([]string, 0, len(p.running))
	for h := range p.running {
		running = append(running, h)
	}
	sort.Strings(running)
	if len(running) > 6 {
		running = append(running[:6], fmt.Sprintf("+%d", len(p.running)-6))
	}
	v.clearLine()
	fmt.Fprintf(v.w, "%-24s %d/%d done, %d failed, running: %s", e.Play, p.done, p.total, p.failed, strings.Join(running, " "))
	v.live = true
}

// prefix names where a message comes from: the play, and the host when there is one.
func prefix(e transport.Event) string {
	if e.Host != "" {
		return e.Play + " " + e.Host
	}
	return e.Play
}

func (v *eventView) clearLine() {
	if v.live {
		fmt.Fprint(v.w, "\r\033[K")
		v.live = false
	}
}

// Recap prints, on text output, one line per host as Ansible's PLAY RECAP does.
func (v *eventView) Recap() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mode == "json" || len(v.order) == 0 {
		return
	}
	v.clearLine()
	fmt.Fprintln(v.w, "RECAP")
	order := slices.Clone(v.order)
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(v.rank(a), v.rank(b)) })
	for _, h := range order {
		c := v.recap[h].counts
		interrupted := ""
		if n := c[transport.StatusInterrupted]; n > 0 {
			interrupted = fmt.Sprintf(" interrupted=%d", n)
		}
		fmt.Fprintf(v.w, "  %-20s ok=%-3d changed=%-3d failed=%-3d unreachable=%-3d skipped=%-3d %s%s\n", h,
			c[transport.StatusOK], c[transport.StatusChanged], c[transport.StatusFailed], c[transport.StatusUnreachable],
			c[transport.StatusSkipped], v.recap[h].duration.Round(time.Millisecond), interrupted)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// escapeText makes what hosts and the API send safe to print on a terminal: every control character but
// newline and tab (escape sequences, carriage returns, backspaces, C1 controls, bidirectional overrides)
// becomes a visible escape such as \x1b or \u202e. Invalid UTF-8 bytes are escaped too. JSON output is
// escaped by its encoder and does not need it.
func escapeText(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unsafeRune reports a character a terminal may act on: C0 and C1 controls but newline and tab, DEL, and
// the Unicode formatting characters that reorder or hide text.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e || r == 0x200f, r == 0x2028 || r == 0x2029:
		return true
	}
	return false
}

// hostless is a host's error without its name in front, where the line names the host already.
func hostless(host, msg string) string { return strings.TrimPrefix(msg, host+": ") }

// inventoryOrder has the recap list hosts in the inventory's order, not the order they finished in.
func (v *eventView) inventoryOrder(inv *inventory.Inventory) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ranks = map[string]int{}
	for i, h := range inv.Hosts {
		v.ranks[h.Name] = i
	}
}

// rank is a host's place in the inventory (hosts it does not name last).
func (v *eventView) rank(host string) int {
	if r, ok := v.ranks[host]; ok {
		return r
	}
	return len(v.ranks)
}
