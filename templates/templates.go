// Package templates holds the files clusterctl puts on hosts that have no Go type (systemd units and
// drop-ins, the containerd configuration, sysctl and module settings) and every script it runs on them
// (*.sh). Each is a text/template. In scripts, a value reaches the shell only through q (one word, quoted by
// transport.ShellQuote) or args (a list, each quoted); typed builders are in tasks/scripts.
package templates

import (
	"bytes"
	"embed"
	"fmt"
	"text/template"

	"github.com/clusterctl/clusterctl/transport"
)

//go:embed files/*
var files embed.FS

var funcs = template.FuncMap{
	"q":    transport.ShellQuote,
	"args": func(words []string) string { return transport.Args(words...) },
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
