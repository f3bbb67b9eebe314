package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// migration moves a native inventory from one schema version to the next, on the file's text, so that
// its comments and layout stay.
type migration struct {
	From, To string
	Apply    func(data []byte, root *yaml.Node) ([]byte, error)
}

// migrations are the steps from the oldest hosts.yaml to APIVersion, in order: the first is from the files
// written before apiVersion existed. A new version of the schema adds its step here.
var migrations = []migration{
	{From: "", To: "clusterctl/v1", Apply: addSchemaHeader},
}

// Migration is what Migrate did.
type Migration struct {
	// From is the version the file was written for ("" before apiVersion existed), To the version now.
	From, To string
	// Steps are the versions it went through, From excluded.
	Steps []string
}

// Changed reports whether the file was moved to another version.
func (m Migration) Changed() bool { return len(m.Steps) > 0 }

// Migrate moves a native inventory to APIVersion, step by step, and returns the new text (data itself
// when it is current). An Ansible inventory has no version and is read as it is.
func Migrate(name string, data []byte) ([]byte, Migration, error) {
	m := Migration{To: APIVersion}
	if detect(name, data) == FormatAnsibleINI {
		return nil, m, errors.New("an Ansible inventory has no schema version: clusterctl reads it as it is (clusterctl init --from converts it to a hosts.yaml)")
	}
	for {
		var diags Diagnostics
		root := parseYAML(name, data, &diags)
		if err := diags.Err(); err != nil {
			return nil, m, err
		}
		if root == nil || root.Kind != yaml.MappingNode {
			return nil, m, fmt.Errorf("%s is not a YAML mapping: not an inventory", name)
		}
		if !isNative(root) {
			return nil, m, errors.New("an Ansible inventory has no schema version: clusterctl reads it as it is (clusterctl init --from converts it to a hosts.yaml)")
		}
		version := scalarOf(root, "apiVersion")
		if len(m.Steps) == 0 {
			m.From = version
		}
		if version == APIVersion {
			return data, m, nil
		}
		i := 0
		for i < len(migrations) && migrations[i].From != version {
			i++
		}
		if i == len(migrations) {
			return nil, m, fmt.Errorf("apiVersion %q is not a version of hosts.yaml this clusterctl knows (%s): a newer clusterctl wrote it, or it is mistyped", version, APIVersion)
		}
		next, err := migrations[i].Apply(data, root)
		if err != nil {
			return nil, m, fmt.Errorf("from %s to %s: %w", versionName(version), migrations[i].To, err)
		}
		data = next
		m.Steps = append(m.Steps, migrations[i].To)
	}
}

// versionName is a version as messages say it.
func versionName(v string) string {
	if v == "" {
		return "a file without apiVersion"
	}
	return v
}

func scalarOf(root *yaml.Node, key string) string {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			return root.Content[i+1].Value
		}
	}
	return ""
}

// addSchemaHeader writes apiVersion (and kind, when missing) as the first keys of the file's top-level
// mapping, after its leading comments.
func addSchemaHeader(data []byte, root *yaml.Node) ([]byte, error) {
	if root.Style&yaml.FlowStyle != 0 {
		return nil, errors.New("the file is one flow mapping ({...}): add apiVersion: clusterctl/v1 and kind: Inventory to it by hand")
	}
	header := "apiVersion: " + APIVersion + "\n"
	if scalarOf(root, "kind") == "" {
		header += "kind: " + Kind + "\n"
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	at := 0
	for at < len(lines) {
		l := strings.TrimSpace(string(lines[at]))
		if l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			break
		}
		at++
	}
	var out bytes.Buffer
	for _, l := range lines[:at] {
		out.Write(l)
	}
	if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	out.WriteString(header)
	for _, l := range lines[at:] {
		out.Write(l)
	}
	return out.Bytes(), nil
}
