package inventory

// This file builds the Inventory from an Ansible inventory's groups, hosts and variables (kubespray's
// names); ansible.go reads them.

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

func (a *ansible) build(format Format) *Inventory {
	inv := &Inventory{Format: format, pos: positions{}}
	inv.pos[""] = Pos{File: a.file, Line: 1, Col: 1}
	for _, name := range controlPlaneGroups {
		if g, ok := a.groups[name]; ok && g.defined {
			inv.pos["group.kube_control_plane"] = g.pos
			break
		}
	}
	depth := a.depths()
	cp := a.membersOf(controlPlaneGroups...)
	nodes := a.membersOf(nodeGroups...)
	bastions := a.membersOf("bastion")
	// kubespray's etcd group: equal to kube_control_plane (or absent), each control-plane node runs its
	// member stacked; otherwise its hosts get the etcd role (kubeadm's external etcd).
	etcd := map[string]bool{}
	if _, ok := a.groups["etcd"]; ok {
		etcd = a.membersOf("etcd")
	}
	external := false
	for _, name := range a.hostOrder {
		external = external || (len(etcd) > 0 && etcd[name] != cp[name])
	}
	if !external {
		etcd = map[string]bool{}
	}
	if _, ok := a.groups["etcd"]; !ok && len(cp) > 0 {
		a.diags.add(Notice, Pos{File: a.file, Line: 1, Col: 1}, "no etcd group: etcd runs stacked on the kube_control_plane hosts, one member each (as kubeadm does)")
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
		if !cp[name] && !nodes[name] && !etcd[name] {
			a.diags.add(Notice, a.hosts[name].pos, "host is in no kube_control_plane, kube_node or etcd group; it is not part of the cluster")
			continue
		}
		if first == "" || (cp[name] && !cp[first]) {
			first = name
		}
		a.addHost(inv, name, cp[name], nodes[name], etcd[name], vars[name], used)
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
	// The lifted setting's place is where the first host got it (all:vars, typically).
	lift := func(field string) {
		if p, ok := inv.pos["hosts[0]."+field]; ok {
			inv.pos[field] = p
		}
	}
	if h0.User != "" && same(func(a, b HostSSH) bool { return a.User == b.User }) {
		lift("ssh.user")
		inv.SSH.User = h0.User
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.User = ""
		}
	}
	if h0.Port != 0 && same(func(a, b HostSSH) bool { return a.Port == b.Port }) {
		lift("ssh.port")
		inv.SSH.Port = h0.Port
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.Port = 0
		}
	}
	if h0.Become != nil && same(func(a, b HostSSH) bool { return b.Become != nil && *a.Become == *b.Become }) {
		lift("ssh.become")
		inv.SSH.Become = h0.Become
		for i := range inv.Hosts {
			inv.Hosts[i].SSH.Become = nil
		}
	}
	if len(h0.IdentityFiles) == 1 && same(func(a, b HostSSH) bool { return len(b.IdentityFiles) == 1 && a.IdentityFiles[0] == b.IdentityFiles[0] }) {
		lift("ssh.identityFiles")
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

func (a *ansible) addHost(inv *Inventory, name string, cp, node, etcd bool, vars map[string]avar, used map[string]bool) {
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
	if etcd {
		h.Roles = append(h.Roles, RoleEtcd)
	}
	set := func(field string, names ...string) (string, bool) {
		return a.strAt(inv, k+"."+field, vars, used, names...)
	}
	a.hostAddresses(inv, k, &h, vars, used)
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
		inv.pos[k+".ssh.become"] = v.pos
		b, valid := parseBool(v.value.Value)
		if !valid {
			a.diags.add(Error, v.pos, "%q is not true or false", v.value.Value)
		}
		h.SSH.Become = &b
	}
	a.connectionWarnings(vars, used)
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
	if cp || node {
		h.Kubelet = a.kubelet(vars, used, inv.pos, k+".kubelet", cp)
	}
	inv.Hosts = append(inv.Hosts, h)
}

// strAt is the first of the variables names that is set, its position recorded for the inventory's field at key.
func (a *ansible) strAt(inv *Inventory, key string, vars map[string]avar, used map[string]bool, names ...string) (string, bool) {
	v, ok := a.str(vars, used, names...)
	if ok {
		inv.pos[key] = a.posOf(vars, names...)
	}
	return v, ok
}

// hostAddresses sets the host's address (ansible_host) and internal addresses (ip or access_ip, and ip6).
func (a *ansible) hostAddresses(inv *Inventory, k string, h *Host, vars map[string]avar, used map[string]bool) {
	set := func(field string, names ...string) (string, bool) {
		return a.strAt(inv, k+"."+field, vars, used, names...)
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
	// ip6: a dual-stack node's IPv6 address, beside ip (else beside ansible_host when that is an IPv4
	// address, as kubespray falls back to it).
	if v, ok := a.str(vars, used, "ip6"); ok {
		if h.InternalAddress == "" {
			if ip, err := netip.ParseAddr(h.Address); err == nil && ip.Is4() {
				h.InternalAddress = h.Address
			}
			inv.pos[k+".internalAddress"] = a.posOf(vars, "ip6")
		}
		h.InternalAddress = strings.TrimPrefix(h.InternalAddress+","+v, ",")
	}
}

// connectionWarnings says, once per place, what clusterctl does instead of Ansible connection settings it
// does not take.
func (a *ansible) connectionWarnings(vars map[string]avar, used map[string]bool) {
	if a.warned == nil {
		a.warned = map[Pos]bool{}
	}
	warn := func(v avar, format string, args ...any) {
		used[v.name] = true
		if !a.warned[v.pos] {
			a.warned[v.pos] = true
			a.diags.add(Warning, v.pos, format, args...)
		}
	}
	if v, ok := vars["ansible_connection"]; ok && v.value.Kind == yaml.ScalarNode {
		switch v.value.Value {
		case "ssh", "smart", "paramiko":
			used[v.name] = true
		case "local":
			warn(v, "ansible_connection=local: clusterctl reaches every host over SSH, this machine too (at its ansible_host, or its name)")
		default:
			warn(v, "ansible_connection=%s: clusterctl reaches hosts over SSH only", v.value.Value)
		}
	}
	for _, n := range []string{"ansible_password", "ansible_ssh_pass", "ansible_ssh_password"} {
		if v, ok := vars[n]; ok {
			warn(v, "%s: clusterctl does not take passwords from inventories; it logs in with SSH keys (ssh-agent, ansible_ssh_private_key_file or ssh.identityFiles)", n)
		}
	}
	if v, ok := vars["ansible_become_method"]; ok && v.value.Kind == yaml.ScalarNode {
		if v.value.Value == "sudo" {
			used[v.name] = true
		} else {
			warn(v, "ansible_become_method=%s: clusterctl becomes root with sudo only (a sudo password, if needed, from CLUSTERCTL_BECOME_PASSWORD or the terminal)", v.value.Value)
		}
	}
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
	if str("cluster.kubernetesVersion", &c.KubernetesVersion, "kube_version") && len(c.KubernetesVersion) > 0 && c.KubernetesVersion[0] >= '0' && c.KubernetesVersion[0] <= '9' {
		c.KubernetesVersion = "v" + c.KubernetesVersion // kubespray writes 1.32.5 since 2.27
	}
	str("cluster.networking.podSubnet", &c.Networking.PodSubnet, "kube_pods_subnet")
	str("cluster.networking.serviceSubnet", &c.Networking.ServiceSubnet, "kube_service_addresses")
	if !str("cluster.networking.dnsDomain", &c.Networking.DNSDomain, "dns_domain") {
		str("cluster.networking.dnsDomain", &c.Networking.DNSDomain, "cluster_name")
	}
	if v, ok := a.integer(fv, used, "kube_network_node_prefix"); ok {
		c.Networking.NodeCIDRMaskSize = v
		inv.pos["cluster.networking.nodeCIDRMaskSize"] = fv["kube_network_node_prefix"].pos
	}
	a.dualStack(inv, fv, used)
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
	a.kubeletExtraArgs(inv, fv, used)
	a.evictionHard(inv, fv, used)
	a.network(inv, fv, used)
	a.proxyMode(inv, fv, used)
	a.endpoint(inv, fv, used)
	a.warnClusterVars(first, vars)
}

// endpoint reads the control-plane endpoint: kubespray's load balancer (its domain name if given, else its
// address) and port.
func (a *ansible) endpoint(inv *Inventory, fv map[string]avar, used map[string]bool) {
	c := &inv.Cluster
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
		if host != "" && host != v && !slices.Contains(c.APIServer.CertSANs, host) {
			// kubespray puts both the load balancer's name and its address in the certificate.
			inv.pos[fmt.Sprintf("cluster.apiServer.certSANs[%d]", len(c.APIServer.CertSANs))] = fv["loadbalancer_apiserver"].pos
			c.APIServer.CertSANs = append(c.APIServer.CertSANs, host)
		}
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
}

// warnClusterVars warns of a cluster setting given differently to different hosts: it cannot be honoured,
// and the first host's value is used.
func (a *ansible) warnClusterVars(first string, vars map[string]map[string]avar) {
	fv := vars[first]
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
		if ref, ok := a.reference(vars, used, v, 0); ok {
			return ref, true
		}
		if !a.scalar(v) || isNull(v.value) {
			return "", false
		}
		return v.value.Value, true
	}
	return "", false
}

// kubesprayDefaults are the values kubespray gives variables that inventories refer to.
var kubesprayDefaults = map[string]string{"cluster_name": "cluster.local"}

var jinjaVar = regexp.MustCompile(`^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)

// reference resolves a value that is nothing but another variable, "{{ cluster_name }}" (kubespray's
// dns_domain), as Ansible would: that variable's value for the same host, else kubespray's default. Any
// other template is left to scalar to report.
func (a *ansible) reference(vars map[string]avar, used map[string]bool, v avar, depth int) (string, bool) {
	if v.value.Kind != yaml.ScalarNode || depth > 4 {
		return "", false
	}
	m := jinjaVar.FindStringSubmatch(strings.TrimSpace(v.value.Value))
	if m == nil {
		return "", false
	}
	if r, ok := vars[m[1]]; ok {
		used[r.name] = true
		if s, ok := a.reference(vars, used, r, depth+1); ok {
			return s, true
		}
		if r.value.Kind == yaml.ScalarNode && !isNull(r.value) && !strings.Contains(r.value.Value, "{{") {
			return r.value.Value, true
		}
		return "", false
	}
	d, ok := kubesprayDefaults[m[1]]
	return d, ok
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

// dualStack maps kubespray's IPv6 settings: ipv6_stack (enable_dual_stack_networks before kubespray 2.27)
// adds kube_pods_subnet_ipv6 and kube_service_addresses_ipv6 (else clusterctl's IPv6 defaults) to the IPv4
// ranges, or takes their place with ipv4_stack false; kube_network_node_prefix_ipv6 is the IPv6 node mask.
func (a *ansible) dualStack(inv *Inventory, fv map[string]avar, used map[string]bool) {
	c := &inv.Cluster
	flag := func(names ...string) (bool, bool) {
		s, ok := a.str(fv, used, names...)
		if !ok {
			return false, false
		}
		b, valid := parseBool(s)
		if !valid {
			a.diags.add(Error, a.posOf(fv, names...), "%q is not true or false", s)
			return false, false
		}
		return b, true
	}
	v6, set := flag("ipv6_stack", "enable_dual_stack_networks")
	if !set || !v6 {
		return
	}
	v4, set4 := flag("ipv4_stack")
	v4 = v4 || !set4
	pair := func(key string, dst *string, name, v4Default, v6Default string) {
		six := v6Default
		if s, ok := a.str(fv, used, name); ok {
			six = s
			inv.pos[key] = a.posOf(fv, name)
		}
		switch {
		case !v4:
			*dst = six
		case *dst == "":
			*dst = v4Default + "," + six
		default:
			*dst += "," + six
		}
		if _, ok := inv.pos[key]; !ok {
			inv.pos[key] = a.posOf(fv, "ipv6_stack", "enable_dual_stack_networks")
		}
	}
	pair("cluster.networking.podSubnet", &c.Networking.PodSubnet, "kube_pods_subnet_ipv6", DefaultPodSubnet, DefaultPodSubnetIPv6)
	pair("cluster.networking.serviceSubnet", &c.Networking.ServiceSubnet, "kube_service_addresses_ipv6", DefaultServiceSubnet, DefaultServiceSubnetIPv6)
	if v, ok := a.integer(fv, used, "kube_network_node_prefix_ipv6"); ok {
		c.Networking.NodeCIDRMaskSizeIPv6 = v
		inv.pos["cluster.networking.nodeCIDRMaskSizeIPv6"] = fv["kube_network_node_prefix_ipv6"].pos
	}
}
