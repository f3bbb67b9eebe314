package inventory

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Severity says how much a diagnostic matters.
type Severity int

const (
	// Error makes the inventory unusable.
	Error Severity = iota
	// Warning is accepted but probably not what the user wants.
	Warning
	// Notice tells the user what clusterctl will do on its own.
	Notice
)

func (s Severity) String() string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	default:
		return "notice"
	}
}

// Pos is where a value came from: a file, a line and column (1-based; 0 when unknown) and the path of the
// field as the user wrote it ("hosts.cp2.address", "all.hosts.node1.ansible_host").
type Pos struct {
	File string
	Line int
	Col  int
	Path string
}

func (p Pos) location() string {
	switch {
	case p.File == "":
		return ""
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Diagnostic is one problem found in an inventory.
type Diagnostic struct {
	Severity Severity
	Pos      Pos
	Message  string
}

// String renders the diagnostic as FILE:LINE:COL: [warning: ]PATH: MESSAGE.
func (d Diagnostic) String() string {
	var b strings.Builder
	if loc := d.Pos.location(); loc != "" {
		b.WriteString(loc)
		b.WriteString(": ")
	}
	if d.Severity != Error {
		b.WriteString(d.Severity.String())
		b.WriteString(": ")
	}
	if d.Pos.Path != "" {
		b.WriteString(printable(d.Pos.Path))
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Diagnostics is every problem found in one load, in file order.
type Diagnostics []Diagnostic

func (ds *Diagnostics) add(sev Severity, p Pos, format string, args ...any) {
	*ds = append(*ds, Diagnostic{Severity: sev, Pos: p, Message: fmt.Sprintf(format, args...)})
}

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Filter returns the diagnostics of one severity.
func (ds Diagnostics) Filter(sev Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == sev {
			out = append(out, d)
		}
	}
	return out
}

// sort orders diagnostics by file, line and column, keeping the order of those at the same place.
func (ds Diagnostics) sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Err returns nil when there is no error, else an *InvalidError holding the errors.
func (ds Diagnostics) Err() error {
	errs := ds.Filter(Error)
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Diagnostics: errs}
}

// InvalidError is returned for an inventory with errors; it lists every one of them.
type InvalidError struct {
	Diagnostics Diagnostics
}

func (e *InvalidError) Error() string {
	lines := make([]string, 0, len(e.Diagnostics)+1)
	for _, d := range e.Diagnostics {
		lines = append(lines, d.String())
	}
	n := len(e.Diagnostics)
	lines = append(lines, fmt.Sprintf("inventory is invalid: %d error%s", n, plural(n)))
	return strings.Join(lines, "\n")
}

// IsInvalid reports whether err is (or wraps) an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// printable quotes a string that holds control or invalid characters, so that it prints on one line.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
