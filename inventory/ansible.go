package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
	vars     []avar
	pos      Pos
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
}

func newAnsible(file string, diags *Diagnostics) *ansible {
	a := &ansible{file: file, diags: diags, groups: map[string]*agroup{}, hosts: map[string]*ahost{}}
	a.group("all", Pos{File: file, Line: 1, Col: 1, Path: "all"})
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

func (g *agroup) addChild(name string) {
	for _, c := range g.children {
		if c == name {
			return
		}
	}
	g.children = append(g.children, name)
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
	a.readVarDirs(dir)
	return a.build(FormatAnsibleYAML)
}

func (a *ansible) pos(n *yaml.Node, path string) Pos {
	return Pos{File: a.file, Line: n.Line, Col: n.Column, Path: path}
}

func (a *ansible) yamlGroup(key, body *yaml.Node, path string) {
	g := a.group(key.Value, a.pos(key, path))
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
				g.addChild(ck.Value)
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

// ---- build the model ----

// Variables clusterctl reads from hosts (and from groups, for all their hosts).
var hostVars = map[string]bool{
	"ansible_host": true, "ansible_ssh_host": true, "ansible_port": true, "ansible_ssh_port": true,
	"ansible_user": true, "ansible_ssh_user": true, "ansible_ssh_private_key_file": true,
	"ansible_private_key_file": true, "ansible_become": true, "ip": true, "access_ip": true,
	"node_labels": true, "node_taints": true,
}

// Variables clusterctl reads for the cluster as a whole (kubespray's names).
var clusterVars = map[string]bool{
	"kube_version": true, "kube_pods_subnet": true, "kube_service_addresses": true,
	"kube_network_node_prefix": true, "cluster_name": true, "dns_domain": true, "kube_apiserver_port": true,
	"apiserver_loadbalancer_domain_name": true, "loadbalancer_apiserver": true,
	"supplementary_addresses_in_ssl_keys": true,
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

func (a *ansible) build(format Format) *Inventory {
	inv := &Inventory{Format: format, pos: positions{}}
	inv.pos[""] = Pos{File: a.file, Line: 1, Col: 1}
	depth := a.depths()
	cp := a.membersOf(controlPlaneGroups...)
	nodes := a.membersOf(nodeGroups...)
	bastions := a.membersOf("bastion")
	if _, ok := a.groups["etcd"]; ok {
		etcd := a.membersOf("etcd")
		for _, name := range a.hostOrder {
			switch {
			case etcd[name] && !cp[name]:
				a.diags.add(Error, a.hosts[name].pos, "host is in group etcd but not in kube_control_plane: clusterctl runs etcd stacked on the control-plane hosts, so the two groups must be equal")
			case cp[name] && !etcd[name] && len(etcd) > 0:
				a.diags.add(Error, a.hosts[name].pos, "control-plane host is not in group etcd: clusterctl runs etcd stacked on the control-plane hosts, so the two groups must be equal")
			}
		}
	}
	used := map[string]bool{}
	vars := map[string]map[string]avar{}
	var first string
	for _, name := range a.hostOrder {
		vars[name] = a.varsFor(name, depth)
		if bastions[name] {
			inv.SSH.Bastions = append(inv.SSH.Bastions, a.bastion(name, vars[name], used))
			continue
		}
		if !cp[name] && !nodes[name] {
			a.diags.add(Notice, a.hosts[name].pos, "host is in no kube_control_plane or kube_node group; it is not part of the cluster")
			continue
		}
		if first == "" || (cp[name] && !cp[first]) {
			first = name
		}
		a.addHost(inv, name, cp[name], nodes[name], vars[name], used)
	}
	if len(inv.Hosts) > 0 {
		inv.pos["hosts"] = a.hosts[inv.Hosts[0].Name].pos
	} else {
		inv.pos["hosts"] = Pos{File: a.file, Line: 1, Col: 1, Path: "all.hosts"}
	}
	if first != "" {
		a.clusterSettings(inv, first, vars, used)
	}
	liftSSH(inv)
	a.listIgnored(inv, used)
	return inv
}

// liftSSH moves SSH settings that every host shares (typically set in all:vars) to the inventory's ssh
// section, so that the normalized inventory reads as a person would write it.
func liftSSH(inv *Inventory) {
	if len(inv.Hosts) == 0 {
		return
	}
	h0 := inv.Hosts[0].SSH
	same := func(eq func(a, b HostSSH) bool) bool {
		for _, h := range inv.Hosts[1:] {
			if !eq(h0, h.SSH) {
				return false
			}
		}
		return true
	}
	if h0.User != "" && same(func(a, b HostSSH) bool { return a.User == b.User }) {
		inv.SSH.User = h0.User
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.User = ""
		}
	}
	if h0.Port != 0 && same(func(a, b HostSSH) bool { return a.Port == b.Port }) {
		inv.SSH.Port = h0.Port
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.Port = 0
		}
	}
	if h0.Become != nil && same(func(a, b HostSSH) bool { return b.Become != nil && *a.Become == *b.Become }) {
		inv.SSH.Become = h0.Become
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.Become = nil
		}
	}
	if len(h0.IdentityFiles) == 1 && same(func(a, b HostSSH) bool { return len(b.IdentityFiles) == 1 && a.IdentityFiles[0] == b.IdentityFiles[0] }) {
		inv.SSH.IdentityFiles = h0.IdentityFiles
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.IdentityFiles = nil
		}
	}
}

func (a *ansible) bastion(name string, vars map[string]avar, used map[string]bool) Bastion {
	b := Bastion{Address: name}
	if v, ok := a.str(vars, used, "ansible_host", "ansible_ssh_host"); ok {
		b.Address = v
	}
	if v, ok := a.str(vars, used, "ansible_user", "ansible_ssh_user"); ok {
		b.User = v
	}
	if v, ok := a.integer(vars, used, "ansible_port", "ansible_ssh_port"); ok {
		b.Port = v
	}
	if v, ok := a.str(vars, used, "ansible_ssh_private_key_file", "ansible_private_key_file"); ok {
		b.IdentityFiles = []string{v}
	}
	return b
}

func (a *ansible) addHost(inv *Inventory, name string, cp, node bool, vars map[string]avar, used map[string]bool) {
	i := len(inv.Hosts)
	k := fmt.Sprintf("hosts[%d]", i)
	hp := a.hosts[name].pos
	h := Host{Name: name}
	inv.pos[k] = hp
	inv.pos[k+".name"] = hp
	inv.pos[k+".nodeName"] = hp
	inv.pos[k+".roles"] = hp
	if cp {
		h.Roles = append(h.Roles, RoleControlPlane)
	}
	if node {
		h.Roles = append(h.Roles, RoleWorker)
	}
	set := func(field string, names ...string) (string, bool) {
		v, ok := a.str(vars, used, names...)
		if ok {
			inv.pos[k+"."+field] = a.posOf(vars, names...)
		}
		return v, ok
	}
	if v, ok := set("address", "ansible_host", "ansible_ssh_host"); ok {
		h.Address = v
	}
	if v, ok := set("internalAddress", "ip"); ok {
		h.InternalAddress = v
		if acc, ok := a.str(vars, used, "access_ip"); ok && acc != v {
			a.diags.add(Notice, vars["access_ip"].pos, "access_ip %s differs from ip %s: clusterctl uses ip as the node's address", acc, v)
		}
	} else if v, ok := set("internalAddress", "access_ip"); ok {
		h.InternalAddress = v
	}
	if v, ok := set("ssh.user", "ansible_user", "ansible_ssh_user"); ok {
		h.SSH.User = v
	}
	if v, ok := a.integer(vars, used, "ansible_port", "ansible_ssh_port"); ok {
		inv.pos[k+".ssh.port"] = a.posOf(vars, "ansible_port", "ansible_ssh_port")
		h.SSH.Port = v
	}
	if v, ok := set("ssh.identityFiles", "ansible_ssh_private_key_file", "ansible_private_key_file"); ok {
		h.SSH.IdentityFiles = []string{v}
	}
	if v, ok := vars["ansible_become"]; ok && a.scalar(v) {
		used[v.name] = true
		b, valid := parseBool(v.value.Value)
		if !valid {
			a.diags.add(Error, v.pos, "%q is not true or false", v.value.Value)
		}
		h.SSH.Become = &b
	}
	if v, ok := vars["node_labels"]; ok {
		used[v.name] = true
		inv.pos[k+".labels"] = v.pos
		h.Labels = a.labels(v, inv.pos, k+".labels")
	}
	if v, ok := vars["node_taints"]; ok {
		used[v.name] = true
		inv.pos[k+".taints"] = v.pos
		h.Taints = a.taints(v, inv.pos, k+".taints")
	}
	inv.Hosts = append(inv.Hosts, h)
}

func (a *ansible) labels(v avar, pos positions, key string) map[string]string {
	if v.value.Kind != yaml.MappingNode {
		a.diags.add(Error, v.pos, "expected a mapping of label names to values, got %s", kindName(v.value))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v.value.Content); i += 2 {
		lk, lv := v.value.Content[i], resolve(v.value.Content[i+1])
		pos[key+"."+lk.Value] = Pos{File: v.pos.File, Line: lk.Line, Col: lk.Column, Path: join(v.pos.Path, lk.Value)}
		out[lk.Value] = lv.Value
	}
	return out
}

// taints reads kubespray's node_taints: a list of "key=value:Effect" or "key:Effect".
func (a *ansible) taints(v avar, pos positions, key string) []Taint {
	if v.value.Kind != yaml.SequenceNode {
		a.diags.add(Error, v.pos, "expected a list of taints (\"key=value:NoSchedule\"), got %s", kindName(v.value))
		return nil
	}
	var out []Taint
	for i, item := range v.value.Content {
		item = resolve(item)
		tk := fmt.Sprintf("%s[%d]", key, i)
		p := Pos{File: v.pos.File, Line: item.Line, Col: item.Column, Path: fmt.Sprintf("%s[%d]", v.pos.Path, i)}
		pos[tk+".key"], pos[tk+".value"], pos[tk+".effect"] = p, p, p
		kv, effect, ok := strings.Cut(item.Value, ":")
		if item.Kind != yaml.ScalarNode || !ok {
			a.diags.add(Error, p, "%q is not a taint (\"key=value:NoSchedule\")", item.Value)
			continue
		}
		k, val, _ := strings.Cut(kv, "=")
		out = append(out, Taint{Key: k, Value: val, Effect: effect})
	}
	return out
}

func (a *ansible) clusterSettings(inv *Inventory, first string, vars map[string]map[string]avar, used map[string]bool) {
	fv := vars[first]
	c := &inv.Cluster
	str := func(key string, dst *string, names ...string) bool {
		v, ok := a.str(fv, used, names...)
		if ok {
			*dst = v
			inv.pos[key] = a.posOf(fv, names...)
		}
		return ok
	}
	str("cluster.kubernetesVersion", &c.KubernetesVersion, "kube_version")
	str("cluster.networking.podSubnet", &c.Networking.PodSubnet, "kube_pods_subnet")
	str("cluster.networking.serviceSubnet", &c.Networking.ServiceSubnet, "kube_service_addresses")
	if !str("cluster.networking.dnsDomain", &c.Networking.DNSDomain, "dns_domain") {
		str("cluster.networking.dnsDomain", &c.Networking.DNSDomain, "cluster_name")
	}
	if v, ok := a.integer(fv, used, "kube_network_node_prefix"); ok {
		c.Networking.NodeCIDRMaskSize = v
		inv.pos["cluster.networking.nodeCIDRMaskSize"] = fv["kube_network_node_prefix"].pos
	}
	if v, ok := a.integer(fv, used, "kube_apiserver_port"); ok {
		c.APIServer.BindPort = v
		inv.pos["cluster.apiServer.bindPort"] = fv["kube_apiserver_port"].pos
	}
	if v, ok := fv["supplementary_addresses_in_ssl_keys"]; ok {
		used[v.name] = true
		if v.value.Kind != yaml.SequenceNode {
			a.diags.add(Error, v.pos, "expected a list of names and addresses, got %s", kindName(v.value))
		}
		for i, item := range v.value.Content {
			c.APIServer.CertSANs = append(c.APIServer.CertSANs, resolve(item).Value)
			inv.pos[fmt.Sprintf("cluster.apiServer.certSANs[%d]", i)] = Pos{File: v.pos.File, Line: item.Line, Col: item.Column, Path: fmt.Sprintf("%s[%d]", v.pos.Path, i)}
		}
	}
	// The endpoint: kubespray's load balancer (its domain name if given, else its address) and port.
	var host, port string
	if v, ok := fv["loadbalancer_apiserver"]; ok {
		used[v.name] = true
		inv.pos["cluster.controlPlaneEndpoint"] = v.pos
		if v.value.Kind != yaml.MappingNode {
			a.diags.add(Error, v.pos, "expected a mapping with address and port, got %s", kindName(v.value))
		}
		for i := 0; i+1 < len(v.value.Content); i += 2 {
			switch v.value.Content[i].Value {
			case "address":
				host = v.value.Content[i+1].Value
			case "port":
				port = v.value.Content[i+1].Value
			}
		}
	}
	if v, ok := a.str(fv, used, "apiserver_loadbalancer_domain_name"); ok {
		host = v
		inv.pos["cluster.controlPlaneEndpoint"] = fv["apiserver_loadbalancer_domain_name"].pos
	}
	if host != "" {
		if port == "" {
			port = strconv.Itoa(DefaultAPIServerPort)
			if c.APIServer.BindPort != 0 {
				port = strconv.Itoa(c.APIServer.BindPort)
			}
		}
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		c.ControlPlaneEndpoint = host + ":" + port
	}
	// A cluster setting given differently to different hosts cannot be honoured: say which value wins.
	warned := map[Pos]bool{}
	for _, name := range a.hostOrder {
		for vn := range clusterVars {
			mine, ok1 := vars[name][vn]
			theirs, ok2 := fv[vn]
			if ok1 && ok2 && mine.pos != theirs.pos && !warned[mine.pos] && !sameValue(mine.value, theirs.value) {
				warned[mine.pos] = true
				a.diags.add(Warning, mine.pos, "%s is a cluster-wide setting; the value for host %s (%s) is used", vn, first, theirs.pos.location())
			}
		}
	}
}

func sameValue(x, y *yaml.Node) bool {
	bx, _ := yaml.Marshal(x)
	by, _ := yaml.Marshal(y)
	return string(bx) == string(by)
}

// str returns the first of the named variables that is set, as a string. Jinja templates cannot be
// evaluated here: such a value is reported and treated as unset.
func (a *ansible) str(vars map[string]avar, used map[string]bool, names ...string) (string, bool) {
	for _, n := range names {
		v, ok := vars[n]
		if !ok {
			continue
		}
		used[n] = true
		if !a.scalar(v) || isNull(v.value) {
			return "", false
		}
		return v.value.Value, true
	}
	return "", false
}

func (a *ansible) integer(vars map[string]avar, used map[string]bool, names ...string) (int, bool) {
	s, ok := a.str(vars, used, names...)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		a.diags.add(Error, a.posOf(vars, names...), "%q is not a whole number", s)
		return 0, false
	}
	return i, true
}

func (a *ansible) scalar(v avar) bool {
	if v.value.Kind != yaml.ScalarNode {
		a.diags.add(Error, v.pos, "expected a single value, got %s", kindName(v.value))
		return false
	}
	if strings.Contains(v.value.Value, "{{") {
		a.diags.add(Warning, v.pos, "%q is a Jinja template, which clusterctl cannot evaluate; the variable is ignored", v.value.Value)
		return false
	}
	return true
}

func (a *ansible) posOf(vars map[string]avar, names ...string) Pos {
	for _, n := range names {
		if v, ok := vars[n]; ok {
			return v.pos
		}
	}
	return Pos{}
}

// listIgnored records every variable clusterctl did not use, once per name and place.
func (a *ansible) listIgnored(inv *Inventory, used map[string]bool) {
	seen := map[Pos]bool{}
	add := func(vs []avar) {
		for _, v := range vs {
			if used[v.name] || hostVars[v.name] || clusterVars[v.name] || seen[v.pos] {
				continue
			}
			seen[v.pos] = true
			inv.Ignored = append(inv.Ignored, v.pos)
		}
	}
	for _, name := range a.groupOrder {
		add(a.groups[name].vars)
	}
	for _, name := range a.hostOrder {
		add(a.hosts[name].vars)
	}
	sort.SliceStable(inv.Ignored, func(i, j int) bool {
		x, y := inv.Ignored[i], inv.Ignored[j]
		if x.File != y.File {
			return x.File < y.File
		}
		return x.Line < y.Line || (x.Line == y.Line && x.Col < y.Col)
	})
	if n := len(inv.Ignored); n > 0 {
		names := make([]string, 0, n)
		for _, p := range inv.Ignored {
			names = append(names, p.Path)
		}
		const most = 8
		list := strings.Join(names[:min(n, most)], ", ")
		if n > most {
			list += fmt.Sprintf(" and %d more (clusterctl inventory show lists them all)", n-most)
		}
		a.diags.add(Notice, Pos{File: inv.Ignored[0].File, Line: inv.Ignored[0].Line, Col: inv.Ignored[0].Col},
			"%d variable%s clusterctl does not use, ignored: %s", n, plural(n), list)
	}
}
