// Package templates holds the files clusterctl puts on hosts that have no Go type: systemd units and
// drop-ins, the containerd configuration, sysctl and module settings. Each is a text/template.
package templates

import (
	"bytes"
	"embed"
	"fmt"
	"text/template"
)

//go:embed files/*
var files embed.FS

var all = template.Must(template.New("").Option("missingkey=error").ParseFS(files, "files/*"))

// Render executes the named template (a file name under files/) with data.
func Render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := all.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Bytes(), nil
}
