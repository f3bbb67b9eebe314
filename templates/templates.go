// Package templates holds the files clusterctl puts on hosts that have no Go type (systemd units and
// drop-ins, the containerd configuration, sysctl and module settings) and every script it runs on them
// (*.sh). Each is a text/template. In scripts, a value reaches the shell only through q (one word, quoted by
// transport.ShellQuote) or args (a list, each quoted); typed builders are in tasks/scripts.
package templates

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/clusterctl/clusterctl/transport"
)

//go:embed files/*
var files embed.FS

var funcs = template.FuncMap{
	"q":        transport.ShellQuote,
	"args":     func(words []string) string { return transport.Args(words...) },
	"unitargs": UnitArgs,
}

// UnitArgs is a command line for a systemd unit's ExecStart=: each word one argument, quoted as systemd
// reads it (double quotes with C escapes when it holds more than safe characters; % and $ doubled, so that
// neither specifiers nor variables expand). Words with control characters are refused.
func UnitArgs(words []string) (string, error) {
	out := make([]string, 0, len(words))
	for _, w := range words {
		a, err := UnitArg(w)
		if err != nil {
			return "", err
		}
		out = append(out, a)
	}
	return strings.Join(out, " "), nil
}

// unitSafe: a character systemd reads as itself in an unquoted word.
func unitSafe(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:,=@+-", r)
}

// UnitArg is one word of UnitArgs.
func UnitArg(w string) (string, error) {
	safe := w != ""
	var b strings.Builder
	for _, r := range w {
		switch {
		case r < 0x20 || r == 0x7f:
			return "", fmt.Errorf("%q: a control character cannot be part of a unit's command line", w)
		case r == '%':
			b.WriteString("%%")
		case r == '$':
			b.WriteString("$$")
		case r == '\\' || r == '"':
			safe = false
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			safe = safe && unitSafe(r)
			b.WriteRune(r)
		}
	}
	if safe {
		return b.String(), nil
	}
	return `"` + b.String() + `"`, nil
}

var all = template.Must(template.New("").Funcs(funcs).Option("missingkey=error").ParseFS(files, "files/*"))

// Render executes the named template (a file name under files/) with data.
func Render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := all.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Bytes(), nil
}
