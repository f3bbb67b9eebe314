package inventory

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// An Ansible inventory is read into groups and hosts with their variables, each remembered with where it was
// written, then turned into the model: group membership gives roles, variables give addresses, SSH settings
// and the cluster settings kubespray defines. Variables clusterctl does not use are listed as ignored.

type avar struct {
	name  string
	value *yaml.Node
	pos   Pos
}

type agroup struct {
	name     string
	hosts    []string
	has      map[string]bool // hosts, for a membership test in constant time
	children []string
	childAt  map[string]Pos // where each child was named
	vars     []avar
	pos      Pos
	// defined: a section or a mapping makes the group ([name], [name:children], name: in YAML); INI's
	// [name:vars] and a child named in [parent:children] do not (Ansible refuses such a group undefined).
	defined bool
	// varsAt is where an INI [name:vars] section first appears.
	varsAt *Pos
}

type ahost struct {
	name string
	vars []avar
	pos  Pos
}

type ansible struct {
	file       string
	diags      *Diagnostics
	groups     map[string]*agroup
	groupOrder []string
	hosts      map[string]*ahost
	hostOrder  []string
	// groupHosts caches each group's members once the groups are read: asking per host made loading
	// quadratic (20,000 hosts took minutes).
	groupHosts map[string]map[string]bool
	// warned are the places of variables already warned about (group variables apply to many hosts).
	warned map[Pos]bool
}

func newAnsible(file string, diags *Diagnostics) *ansible {
	a := &ansible{file: file, diags: diags, groups: map[string]*agroup{}, hosts: map[string]*ahost{}}
	a.group("all", Pos{File: file, Line: 1, Col: 1, Path: "all"}).defined = true
	return a
}

func (a *ansible) group(name string, p Pos) *agroup {
	g, ok := a.groups[name]
	if !ok {
		g = &agroup{name: name, pos: p}
		a.groups[name] = g
		a.groupOrder = append(a.groupOrder, name)
	}
	return g
}

func (a *ansible) host(name string, p Pos) *ahost {
	h, ok := a.hosts[name]
	if !ok {
		h = &ahost{name: name, pos: p}
		a.hosts[name] = h
		a.hostOrder = append(a.hostOrder, name)
	}
	return h
}

func (g *agroup) addHost(name string) {
	if g.has[name] {
		return
	}
	if g.has == nil {
		g.has = map[string]bool{}
	}
	g.has[name] = true
	g.hosts = append(g.hosts, name)
}

func (g *agroup) addChild(name string, at Pos) {
	for _, c := range g.children {
		if c == name {
			return
		}
	}
	g.children = append(g.children, name)
	if g.childAt == nil {
		g.childAt = map[string]Pos{}
	}
	g.childAt[name] = at
}

// ---- YAML ----

func parseAnsibleYAML(file string, root *yaml.Node, dir string, diags *Diagnostics) *Inventory {
	a := newAnsible(file, diags)
	if root.Kind != yaml.MappingNode {
		diags.add(Error, Pos{File: file, Line: root.Line, Col: root.Column}, "expected a mapping of groups (all:, kube_control_plane:, ...), got %s", kindName(root))
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		a.yamlGroup(k, root.Content[i+1], k.Value)
	}
	a.checkGroups()
	a.readVarDirs(dir)
	return a.build(FormatAnsibleYAML)
}

func (a *ansible) pos(n *yaml.Node, path string) Pos {
	return Pos{File: a.file, Line: n.Line, Col: n.Column, Path: path}
}

func (a *ansible) yamlGroup(key, body *yaml.Node, path string) {
	g := a.group(key.Value, a.pos(key, path))
	g.defined = true
	body = resolve(body)
	if isNull(body) {
		return
	}
	if body.Kind != yaml.MappingNode {
		a.diags.add(Error, a.pos(body, path), "expected a group (a mapping with hosts, children or vars), got %s", kindName(body))
		return
	}
	for i := 0; i+1 < len(body.Content); i += 2 {
		k, v := body.Content[i], resolve(body.Content[i+1])
		p := join(path, k.Value)
		switch k.Value {
		case "hosts":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				a.diags.add(Error, a.pos(v, p), "expected a mapping of host names, got %s", kindName(v))
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				hk, hv := v.Content[j], resolve(v.Content[j+1])
				hp := join(p, hk.Value)
				h := a.host(hk.Value, a.pos(hk, hp))
				g.addHost(hk.Value)
				h.vars = append(h.vars, a.yamlVars(hv, hp)...)
			}
		case "children":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				a.diags.add(Error, a.pos(v, p), "expected a mapping of group names, got %s", kindName(v))
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				ck := v.Content[j]
				a.yamlGroup(ck, v.Content[j+1], join(p, ck.Value))
				g.addChild(ck.Value, a.pos(ck, join(p, ck.Value)))
			}
		case "vars":
			g.vars = append(g.vars, a.yamlVars(v, p)...)
		default:
			a.diags.add(Warning, a.pos(k, p), "unexpected key in a group (expected hosts, children or vars); Ansible skips it, and so does clusterctl")
		}
	}
}

func (a *ansible) yamlVars(n *yaml.Node, path string) []avar {
	return varsOf(a.file, n, path, a.diags)
}

func varsOf(file string, n *yaml.Node, path string, diags *Diagnostics) []avar {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		diags.add(Error, Pos{File: file, Line: n.Line, Col: n.Column, Path: path}, "expected a mapping of variables, got %s", kindName(n))
		return nil
	}
	var out []avar
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		out = append(out, avar{name: k.Value, value: resolve(n.Content[i+1]),
			pos: Pos{File: file, Line: k.Line, Col: k.Column, Path: join(path, k.Value)}})
	}
	return out
}

// readVarDirs reads group_vars/ and host_vars/ beside the inventory, as Ansible does: NAME, NAME.yml,
// NAME.yaml, NAME.json, or every such file in a directory NAME/. They take precedence over the inventory's
// own variables.
func (a *ansible) readVarDirs(dir string) {
	a.implicitGroups()
	if dir == "" {
		return
	}
	for _, name := range a.groupOrder {
		g := a.groups[name]
		g.vars = append(g.vars, a.varFiles(filepath.Join(dir, "group_vars", name))...)
	}
	for _, name := range a.hostOrder {
		h := a.hosts[name]
		h.vars = append(h.vars, a.varFiles(filepath.Join(dir, "host_vars", name))...)
	}
}

func (a *ansible) varFiles(base string) []avar {
	var files []string
	for _, ext := range []string{"", ".yml", ".yaml", ".json"} {
		if st, err := os.Stat(base + ext); err == nil && !st.IsDir() {
			files = append(files, base+ext)
		}
	}
	if entries, err := os.ReadDir(base); err == nil {
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yml", ".yaml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(base, e.Name()))
				}
			}
		}
	}
	var out []avar
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			a.diags.add(Error, Pos{File: f}, "%v", err)
			continue
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			sub := Diagnostics{}
			parseYAML(f, data, &sub)
			*a.diags = append(*a.diags, sub...)
			continue
		}
		if len(doc.Content) == 0 {
			continue
		}
		checkDuplicateKeys(f, &doc, "", a.diags)
		out = append(out, varsOf(f, doc.Content[0], "", a.diags)...)
	}
	return out
}

// implicitGroups adds kubespray's k8s_cluster group when the inventory does not define it: kubespray's
// samples no longer declare it, its playbooks make it of kube_control_plane, kube_node and calico_rr, and
// group_vars/k8s_cluster/ holds most of a cluster's settings.
func (a *ansible) implicitGroups() {
	if g, ok := a.groups["k8s_cluster"]; ok && (g.defined || g.varsAt != nil) {
		return
	}
	var children []string
	for _, name := range append(append(append([]string{}, controlPlaneGroups...), nodeGroups...), "calico_rr") {
		if g, ok := a.groups[name]; ok && g.defined {
			children = append(children, name)
		}
	}
	if len(children) == 0 {
		return
	}
	g := a.group("k8s_cluster", Pos{File: a.file, Line: 1, Col: 1, Path: "k8s_cluster"})
	g.defined = true
	for _, c := range children {
		g.addChild(c, a.groups[c].pos)
	}
	a.groups["all"].addChild("k8s_cluster", g.pos)
}

// checkGroups reports what Ansible refuses in a group structure: [name:vars] for a group no section
// defines, a child group no section defines, and a group that is its own descendant.
func (a *ansible) checkGroups() {
	for _, name := range a.groupOrder {
		g := a.groups[name]
		if !g.defined && g.varsAt != nil {
			a.diags.add(Error, *g.varsAt, "group %s is defined by no section (Ansible refuses [%s:vars] without one): add a [%s] or [%s:children] section, or correct the name", name, name, name, name)
		}
		for _, c := range g.children {
			if cg, ok := a.groups[c]; ok && !cg.defined {
				a.diags.add(Error, g.childAt[c], "group %s is defined by no section (Ansible refuses a child group of %s without one): add a [%s] section, or correct the name", c, name, c)
			}
		}
	}
	// A loop: depth-first, reported once at the child reference that closes it.
	state := map[string]int{} // 1 on the path, 2 done
	var path []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = 1
		path = append(path, name)
		g := a.groups[name]
		for _, c := range g.children {
			switch state[c] {
			case 1:
				i := len(path) - 1
				for path[i] != c {
					i--
				}
				loop := append(append([]string{}, path[i:]...), c)
				a.diags.add(Error, g.childAt[c], "group %s is its own descendant (%s): Ansible refuses a loop of :children", c, strings.Join(loop, " → "))
			case 0:
				if _, ok := a.groups[c]; ok {
					visit(c)
				}
			}
		}
		path = path[:len(path)-1]
		state[name] = 2
	}
	for _, name := range a.groupOrder {
		if state[name] == 0 {
			visit(name)
		}
	}
}

// ---- build the model ----

// Variables clusterctl reads from hosts (and from groups, for all their hosts).
var hostVars = map[string]bool{
	"ansible_host": true, "ansible_ssh_host": true, "ansible_port": true, "ansible_ssh_port": true,
	"ansible_user": true, "ansible_ssh_user": true, "ansible_ssh_private_key_file": true,
	"ansible_private_key_file": true, "ansible_become": true, "ip": true, "access_ip": true, "ip6": true,
	"node_labels": true, "node_taints": true, "ansible_become_method": true, "ansible_connection": true,
	"ansible_password": true, "ansible_ssh_pass": true, "ansible_ssh_password": true,
	"kubelet_config_extra_args": true, "kubelet_node_config_extra_args": true, "kubelet_max_pods": true,
}

// Variables clusterctl reads for the cluster as a whole (kubespray's names).
var clusterVars = map[string]bool{
	"kube_version": true, "kube_pods_subnet": true, "kube_service_addresses": true,
	"kube_network_node_prefix": true, "cluster_name": true, "dns_domain": true, "kube_apiserver_port": true,
	"apiserver_loadbalancer_domain_name": true, "loadbalancer_apiserver": true,
	"supplementary_addresses_in_ssl_keys": true, "ipv4_stack": true, "ipv6_stack": true, "enable_dual_stack_networks": true,
	"kube_pods_subnet_ipv6": true, "kube_service_addresses_ipv6": true, "kube_network_node_prefix_ipv6": true,
}

var (
	controlPlaneGroups = []string{"kube_control_plane", "kube-master", "kube_master"}
	nodeGroups         = []string{"kube_node", "kube-node"}
)

// members returns the hosts of a group and of its descendants.
func (a *ansible) members(name string, seen map[string]bool) map[string]bool {
	out := map[string]bool{}
	g, ok := a.groups[name]
	if !ok || seen[name] {
		return out
	}
	seen[name] = true
	for _, h := range g.hosts {
		out[h] = true
	}
	for _, c := range g.children {
		for h := range a.members(c, seen) {
			out[h] = true
		}
	}
	if name == "all" {
		for h := range a.hosts {
			out[h] = true
		}
	}
	return out
}

func (a *ansible) membersOf(names ...string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		for h := range a.members(n, map[string]bool{}) {
			out[h] = true
		}
	}
	return out
}

// depths gives each group its distance from all, as Ansible orders group variables: a child's override its
// parent's, and groups at the same depth apply in name order.
func (a *ansible) depths() map[string]int {
	depth := map[string]int{"all": 0}
	var visit func(name string, d int)
	visit = func(name string, d int) {
		if cur, ok := depth[name]; ok && cur >= d && name != "all" {
			return
		}
		if d > len(a.groups) { // a cycle
			return
		}
		depth[name] = d
		for _, c := range a.groups[name].children {
			if _, ok := a.groups[c]; ok {
				visit(c, d+1)
			}
		}
	}
	for _, name := range a.groupOrder {
		if name != "all" {
			if _, ok := depth[name]; !ok {
				visit(name, 1)
			}
		}
	}
	return depth
}

// hostVarsOf returns the variables in force for a host, lowest precedence first.
func (a *ansible) varsFor(host string, depth map[string]int) map[string]avar {
	var groups []string
	if a.groupHosts == nil {
		a.groupHosts = map[string]map[string]bool{}
		for _, name := range a.groupOrder {
			a.groupHosts[name] = a.members(name, map[string]bool{})
		}
	}
	for _, name := range a.groupOrder {
		if a.groupHosts[name][host] {
			groups = append(groups, name)
		}
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if depth[groups[i]] != depth[groups[j]] {
			return depth[groups[i]] < depth[groups[j]]
		}
		return groups[i] < groups[j]
	})
	out := map[string]avar{}
	for _, g := range groups {
		for _, v := range a.groups[g].vars {
			out[v.name] = v
		}
	}
	if h, ok := a.hosts[host]; ok {
		for _, v := range h.vars {
			out[v.name] = v
		}
	}
	return out
}
