package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, defaults and validates the inventory at path. The error is for a file that cannot be read; a
// file with problems gives an inventory and diagnostics instead (use Diagnostics.Err). Ansible inventories
// also read group_vars/ and host_vars/ beside the file, as Ansible does.
func Load(path string) (*Inventory, Diagnostics, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file, err := inventoryIn(path)
		if err != nil {
			return nil, nil, err
		}
		path = file
	}
	data, err := readFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("inventory %s does not exist: give the path of your inventory with -i (clusterctl init writes one)", path)
	case errors.Is(err, fs.ErrPermission):
		return nil, nil, fmt.Errorf("inventory %s cannot be read by this user: permission denied", path)
	case err != nil:
		return nil, nil, fmt.Errorf("reading inventory %s: %w", path, err)
	}
	inv, diags := parse(path, data, filepath.Dir(path))
	return inv, diags, nil
}

// inventoryNames are the files a directory given as the inventory is searched for, as kubespray's
// inventory/<cluster>/ directories hold them.
var inventoryNames = []string{"hosts.yaml", "hosts.yml", "inventory.ini", "hosts.ini", "inventory.yaml", "inventory.yml", "hosts"}

// inventoryIn finds the one inventory file in a directory, or says which to pass.
func inventoryIn(dir string) (string, error) {
	var found []string
	for _, n := range inventoryNames {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.Mode().IsRegular() {
			found = append(found, filepath.Join(dir, n))
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("reading inventory: %s is a directory without an inventory file (%s): pass the file with -i", dir, strings.Join(inventoryNames, ", "))
	}
	return "", fmt.Errorf("reading inventory: %s is a directory with several inventory files: pass one with -i (%s)", dir, strings.Join(found, " or "))
}

// MaxFileSize is the largest inventory or variables file read: an inventory of thousands of hosts is a few
// MiB; a file past this (or /dev/zero, or a link to it) is refused rather than read into memory.
const MaxFileSize = 16 << 20

// readFile reads at most MaxFileSize bytes of a regular file.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, MaxFileSize>>20)
	}
	return data, nil
}

// Parse reads, defaults and validates an inventory held in memory; name is used in diagnostics. It does not
// read group_vars/ or host_vars/.
func Parse(name string, data []byte) (*Inventory, Diagnostics) {
	return parse(name, data, "")
}

func parse(name string, data []byte, dir string) (*Inventory, Diagnostics) {
	var diags Diagnostics
	var inv *Inventory
	switch detect(name, data) {
	case FormatAnsibleINI:
		inv = parseAnsibleINI(name, data, dir, &diags)
	default:
		root := parseYAML(name, data, &diags)
		if root == nil {
			break
		}
		if what := foreign(root); what != "" {
			diags.add(Error, Pos{File: name, Line: root.Line, Col: root.Column}, "%s, not an inventory clusterctl reads: write a hosts.yaml for the same hosts (clusterctl init --hosts ...; kubespray inventories are read as they are)", what)
			break
		}
		if isNative(root) {
			inv = parseNative(name, root, &diags)
		} else {
			inv = parseAnsibleYAML(name, root, dir, &diags)
		}
	}
	if inv != nil {
		inv.Source = name
		inv.baseDir = dir
		inv.applyDefaults()
		inv.validate(&diags)
	}
	diags.sort()
	return inv, diags
}

var iniSection = regexp.MustCompile(`^\[[A-Za-z0-9_.:-]+\]\s*([#;].*)?$`)

// detect tells INI from YAML: by extension where it says, else by the first line that is not blank or a
// comment (an INI section header), else by whether the text is a YAML mapping at all.
func detect(name string, data []byte) Format {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return FormatNative
	case ".ini", ".cfg":
		return FormatAnsibleINI
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line == "---" {
			continue
		}
		if iniSection.MatchString(line) {
			return FormatAnsibleINI
		}
		break
	}
	var probe yaml.Node
	if err := yaml.Unmarshal(data, &probe); err == nil && len(probe.Content) > 0 && resolve(probe.Content[0]).Kind == yaml.MappingNode {
		return FormatNative
	}
	if bytes.ContainsRune(data, '=') && !bytes.Contains(data, []byte(": ")) {
		return FormatAnsibleINI
	}
	return FormatNative
}

// otherTools are the apiVersion groups of other tools' configuration files, and the tools' names.
var otherTools = map[string]string{"k0sctl.k0sproject.io": "k0sctl", "kubeone.k8c.io": "KubeOne", "kubekey.kubesphere.io": "KubeKey",
	"cluster.x-k8s.io": "Cluster API", "kubeadm.k8s.io": "kubeadm"}

// foreign says what a YAML file with an apiVersion of another tool is ("" for anything else).
func foreign(root *yaml.Node) string {
	if root.Kind != yaml.MappingNode {
		return ""
	}
	var apiVersion, kind string
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			apiVersion = root.Content[i+1].Value
		case "kind":
			kind = root.Content[i+1].Value
		}
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	if tool, ok := otherTools[group]; ok {
		return fmt.Sprintf("this is a %s configuration (apiVersion %s, kind %s)", tool, apiVersion, kind)
	}
	return ""
}

// isNative tells a native inventory (cluster, ssh, or hosts as a list) from an Ansible one (groups).
func isNative(root *yaml.Node) bool {
	if root.Kind != yaml.MappingNode {
		return true // reported by the native decoder as "expected a mapping"
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "cluster", "ssh", "apiVersion", "kind":
			return true
		case "hosts":
			if resolve(root.Content[i+1]).Kind == yaml.SequenceNode {
				return true
			}
		}
	}
	return false
}

func parseNative(file string, root *yaml.Node, diags *Diagnostics) *Inventory {
	inv := &Inventory{Format: FormatNative, pos: positions{}, failed: map[string]bool{}}
	d := &decoder{file: file, pos: inv.pos, failed: inv.failed, diags: diags}
	d.decode(root, reflect.ValueOf(inv).Elem(), "", "")
	return inv
}
