package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

type validator struct {
	inv   *Inventory
	diags *Diagnostics
}

func (inv *Inventory) validate(diags *Diagnostics) {
	if inv.pos == nil {
		inv.pos = positions{}
	}
	v := &validator{inv: inv, diags: diags}
	v.schema()
	v.controlChars()
	v.cluster()
	v.ssh()
	v.hosts()
	v.groups()
	v.hooks("hooks", v.inv.Hooks, true)
	for i := range v.inv.Hosts {
		v.hooks(fmt.Sprintf("hosts[%d].hooks", i), v.inv.Hosts[i].Hooks, false)
	}
	v.networks()
}

// report adds a diagnostic at the field's position, unless the field (or one holding it) could not be
// decoded at all: that was reported already, and anything more would be noise.
func (v *validator) report(sev Severity, key, format string, args ...any) {
	for k := key; ; {
		if v.inv.failed[k] {
			return
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	v.diags.add(sev, v.inv.pos.at(key, v.display(key)), format, args...)
}

// written reports whether the user wrote the field (rather than it being defaulted).
func (v *validator) written(key string) bool {
	_, ok := v.inv.pos[key]
	return ok
}

// brief drops the regular expression from apimachinery's validation messages.
func brief(msg string) string {
	if i := strings.Index(msg, ", regex used for validation"); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, " (e.g. "); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

const dnsRule = "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"

func (v *validator) errorf(key, format string, args ...any) { v.report(Error, key, format, args...) }

// display turns a model path into the path the user reads: hosts[2].address becomes hosts.cp2.address.
func (v *validator) display(key string) string {
	rest, ok := strings.CutPrefix(key, "hosts[")
	if !ok {
		return key
	}
	num, tail, _ := strings.Cut(rest, "]")
	i, err := strconv.Atoi(num)
	if err != nil || i >= len(v.inv.Hosts) || v.inv.Hosts[i].Name == "" {
		return key
	}
	return "hosts." + v.inv.Hosts[i].Name + tail
}

var versionRE = regexp.MustCompile(`^v1\.(\d+)\.(\d+)(-(alpha|beta|rc)\.\d+)?$`)

// CheckKubernetesVersion says whether v is a Kubernetes version clusterctl deploys.
func CheckKubernetesVersion(v string) error {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("%q is not a Kubernetes version (example: %s)", v, DefaultKubernetesVersion)
	}
	if minor, _ := strconv.Atoi(m[1]); minor < minSupportedMinor || minor > maxSupportedMinor {
		return fmt.Errorf("version %s is not supported; clusterctl supports Kubernetes v1.%d to v1.%d", v, minSupportedMinor, maxSupportedMinor)
	}
	return nil
}

func (v *validator) cluster() {
	c := &v.inv.Cluster
	if !nameRE.MatchString(c.Name) {
		v.errorf("cluster.name", "%q is not a valid cluster name (letters, digits, '.', '_' and '-')", c.Name)
	}
	if err := CheckKubernetesVersion(c.KubernetesVersion); err != nil {
		v.errorf("cluster.kubernetesVersion", "%v", err)
	}
	if c.ControlPlaneEndpoint != "" {
		host, port, err := splitHostPort(c.ControlPlaneEndpoint)
		switch {
		case err != nil:
			v.errorf("cluster.controlPlaneEndpoint", "%v", err)
		default:
			if msg := checkAddress(host); msg != "" {
				v.errorf("cluster.controlPlaneEndpoint", "%q %s", host, msg)
			}
			if port != "" {
				v.port("cluster.controlPlaneEndpoint", port)
			}
		}
	}
	v.portNumber("cluster.apiServer.bindPort", c.APIServer.BindPort)
	for i, san := range c.APIServer.CertSANs {
		if msg := checkAddress(strings.TrimPrefix(san, "*.")); msg != "" {
			v.errorf(fmt.Sprintf("cluster.apiServer.certSANs[%d]", i), "%q %s", san, msg)
		}
	}
	for _, comp := range []struct {
		key string
		c   *Component
	}{
		{"cluster.apiServer", &c.APIServer.Component}, {"cluster.controllerManager", &c.ControllerManager},
		{"cluster.scheduler", &c.Scheduler}, {"cluster.etcd", &c.Etcd.Component}, {"cluster.kubelet", &c.Kubelet.Component},
		{"cluster.kubeProxy", &c.KubeProxy.Component},
	} {
		v.component(comp.key, comp.c)
	}
	v.kubeProxy(&c.KubeProxy)
	v.snapshots(c.Etcd.Snapshots)
	if errs := validation.IsDNS1123Subdomain(c.Networking.DNSDomain); len(errs) > 0 {
		v.errorf("cluster.networking.dnsDomain", "%q is not a DNS domain: %s", c.Networking.DNSDomain, dnsRule)
	}
	if repo := c.ImageRepository; !repositoryRE.MatchString(repo) || len(repo) > 255 {
		v.errorf("cluster.imageRepository", "%q is not an image repository (a registry and optional lower-case path, example: registry.k8s.io or registry.example.com:5000/k8s; no scheme, no trailing slash)", repo)
	}
	if ep := c.ContainerRuntimeEndpoint; !socketRE.MatchString(ep) || path.Clean(strings.TrimPrefix(ep, "unix://")) != strings.TrimPrefix(ep, "unix://") {
		v.errorf("cluster.containerRuntimeEndpoint", "%q is not a CRI endpoint: unix:// and a clean absolute path of letters, digits, '.', '_', '+' and '-' (example: %s)", ep, DefaultContainerRuntimeEndpoint)
	}
	if c.ContainerRuntime != RuntimeArtifacts && c.ContainerRuntime != RuntimeHost {
		v.errorf("cluster.containerRuntime", "%q: use %s (clusterctl installs containerd from the artifacts) or %s (the host's own)", c.ContainerRuntime, RuntimeArtifacts, RuntimeHost)
	}
	if c.Registry.CA != "" && !c.Registry.Pull {
		v.errorf("cluster.registry.ca", "a registry CA is used only when hosts pull from the registry: set registry.pull: true")
	}
	v.downloads(&c.Downloads)
	for i, ref := range c.ExtraImages {
		if !isImageRef(ref) {
			v.errorf(fmt.Sprintf("cluster.extraImages[%d]", i), "%q is not an image reference with a registry and a tag (example: quay.io/calico/node:v3.30.3)", ref)
		}
	}
	v.cni(&c.CNI)
	v.certificates(&c.Certificates)
	v.security(&c.Security)
	v.oidc(&c.APIServer)
	v.addons(c)
}

// downloads checks where artifacts pull fetches from.
func (v *validator) downloads(d *Downloads) {
	for _, u := range []struct{ key, v string }{{"release", d.Release}, {"etcd", d.Etcd}, {"containerd", d.Containerd},
		{"runc", d.Runc}, {"cni", d.CNI}, {"crictl", d.Crictl}} {
		if u.v == "" {
			continue
		}
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil || p.RawQuery != "" || p.Fragment != "" {
			v.errorf("cluster.downloads."+u.key, "%q is not a download base URL: http(s)://host[:port][/path], without credentials, query or fragment", u.v)
		}
	}
	if m := d.RegistryMirror; m != "" && (!repositoryRE.MatchString(m) || len(m) > 255) {
		v.errorf("cluster.downloads.registryMirror", "%q is not a registry (host[:port][/path]; no scheme)", m)
	}
	for i, r := range d.InsecureRegistries {
		if !repositoryRE.MatchString(r) || strings.Contains(r, "/") || len(r) > 255 {
			v.errorf(fmt.Sprintf("cluster.downloads.insecureRegistries[%d]", i), "%q is not a registry host[:port] (no scheme, no path)", r)
		}
	}
	if strings.ContainsRune(d.Lock, 0) || len(d.Lock) > 4096 {
		v.errorf("cluster.downloads.lock", "%q is not a file path", d.Lock)
	}
	if strings.ContainsRune(d.Checksums, 0) || len(d.Checksums) > 4096 {
		v.errorf("cluster.downloads.checksums", "%q is not a file path", d.Checksums)
	}
}

// certificates checks the certificates' algorithm and validity.
func (v *validator) certificates(cert *Certificates) {
	if !slices.Contains(KeyAlgorithms, cert.KeyAlgorithm) {
		v.errorf("cluster.certificates.keyAlgorithm", "%q is not supported; use one of %s", cert.KeyAlgorithm, strings.Join(KeyAlgorithms, ", "))
	}
	if cert.CAValidity.Duration < 0 {
		v.errorf("cluster.certificates.caValidity", "must be positive")
	}
	if cert.Validity.Duration < 0 {
		v.errorf("cluster.certificates.validity", "must be positive")
	}
	if cert.Validity.Duration > cert.CAValidity.Duration {
		v.report(Warning, "cluster.certificates.validity", "certificates valid for %s outlive their CA (%s); they will be cut to the CA's expiry",
			cert.Validity, cert.CAValidity)
	}
}

// imageRefRE is registry/path:tag: an image repository (repositoryRE) and a tag.
// The tag's length (at most 128) is checked apart: a counted repetition compiles that many states at start-up.
var imageRefRE = regexp.MustCompile(repositoryRE.String()[:len(repositoryRE.String())-1] + `:[\w][\w.-]*$`)

var flagRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

func (v *validator) component(key string, c *Component) {
	for _, a := range c.ExtraArgs {
		if !flagRE.MatchString(a.Name) {
			v.errorf(key+".extraArgs."+a.Name, "%q is not a flag name", a.Name)
		}
		if key == "cluster.kubelet" && strings.ContainsAny(a.Value, kubeletFlagUnsafe) {
			v.errorf(key+".extraArgs."+a.Name, "%q: a kubelet flag value may not hold spaces, quotes, '\\', '$', '`' or ';' (it goes through kubeadm-flags.env)", a.Value)
		}
	}
	names := map[string]bool{}
	for i, vol := range c.ExtraVolumes {
		k := fmt.Sprintf("%s.extraVolumes[%d]", key, i)
		if errs := validation.IsDNS1123Label(vol.Name); len(errs) > 0 {
			v.errorf(k+".name", "%q is not a volume name: %s", vol.Name, brief(errs[0]))
		} else if names[vol.Name] {
			v.errorf(k+".name", "volume %q is defined twice", vol.Name)
		}
		names[vol.Name] = true
		if !path.IsAbs(vol.HostPath) {
			v.errorf(k+".hostPath", "%q is not an absolute path", vol.HostPath)
		}
		if !path.IsAbs(vol.MountPath) {
			v.errorf(k+".mountPath", "%q is not an absolute path", vol.MountPath)
		}
		switch vol.PathType {
		case "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice":
		default:
			v.errorf(k+".pathType", "%q is not a hostPath type (DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice)", vol.PathType)
		}
	}
}

var fingerprintRE = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}=?$`)

func (v *validator) ssh() {
	s := &v.inv.SSH
	if s.User == "" {
		v.errorf("ssh.user", "must not be empty")
	}
	v.user("ssh.user", s.User)
	v.portNumber("ssh.port", s.Port)
	v.identityFiles("ssh.identityFiles", s.IdentityFiles)
	v.bastions("ssh.bastions", s.Bastions)
}

// identityFiles warns of a private key to log in with that is not on this machine (as the SSH client
// opens it: ~ is the home directory), so that it is said when the inventory is read, not when the first
// host is dialed. A warning: an inventory is also validated where it is kept (CI), without the keys.
func (v *validator) identityFiles(key string, files []string) {
	for i, f := range files {
		p := f
		if rest, ok := strings.CutPrefix(f, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, rest)
			}
		}
		k := fmt.Sprintf("%s[%d]", key, i)
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			v.report(Warning, k, "%s does not exist on this machine: logging in with it will fail here (ssh-keygen makes a key; ~ is your home)", f)
		case err != nil:
			v.report(Warning, k, "%s cannot be read: %v", f, errors.Unwrap(err))
		case st.IsDir():
			v.report(Warning, k, "%s is a directory, not a private key", f)
		}
	}
}

func (v *validator) hostKeys(key string, pins HostKeys) {
	seen := map[string]bool{}
	for i, p := range pins {
		k := key
		if len(pins) > 1 {
			k = fmt.Sprintf("%s[%d]", key, i)
		}
		switch {
		case !fingerprintRE.MatchString(p):
			v.errorf(k, "%q is not a SHA256 fingerprint as ssh-keygen -lf prints it (SHA256:...)", p)
		case seen[p]:
			v.errorf(k, "%q is pinned twice", p)
		}
		seen[p] = true
	}
}

func (v *validator) bastions(key string, bs []Bastion) {
	for i, b := range bs {
		k := fmt.Sprintf("%s[%d]", key, i)
		if msg := checkAddress(b.Address); msg != "" {
			v.errorf(k+".address", "%q %s", b.Address, msg)
		}
		if b.Port != 0 {
			v.portNumber(k+".port", b.Port)
		}
		v.user(k+".user", b.User)
		v.identityFiles(k+".identityFiles", b.IdentityFiles)
		v.hostKeys(k+".hostKey", b.HostKey)
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (v *validator) hosts() {
	inv := v.inv
	if len(inv.Hosts) == 0 {
		v.errorf("hosts", "the inventory has no hosts")
		return
	}
	seen := hostsSeen{names: map[string]int{}, nodeNames: map[string]int{}, addrs: map[string]int{}, internal: map[string]int{}}
	controlPlanes := 0
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		k := fmt.Sprintf("hosts[%d]", i)
		v.hostIdentity(k, i, h, &seen)
		v.roles(k, h)
		if h.Has(RoleControlPlane) {
			controlPlanes++
		}
		v.labelsAndTaints(k+".labels", k+".taints", h.Labels, h.Taints)
		v.kubeletConfig(k+".kubelet", h.Kubelet)
		if !h.IsNode() && (len(h.Labels) > 0 || len(h.Taints) > 0 || len(h.Kubelet) > 0) {
			v.report(Warning, k+".roles", "%s is an etcd member only, not a node: its labels, taints and kubelet settings are not used", h.Name)
		}
		if h.SSH.Port != 0 {
			v.portNumber(k+".ssh.port", h.SSH.Port)
		}
		v.user(k+".ssh.user", h.SSH.User)
		v.identityFiles(k+".ssh.identityFiles", h.SSH.IdentityFiles)
		v.hostKeys(k+".ssh.hostKey", h.SSH.HostKey)
		v.bastions(k+".ssh.bastions", h.SSH.Bastions)
	}
	// A host's name may not be another host's node name: nodes are matched to hosts by both (CSR approval
	// among them), so one node could be given a certificate naming the other.
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		if j, ok := seen.names[h.NodeName]; ok && j != i && h.NodeName != h.Name && seen.nodeNames[h.NodeName] == i {
			v.errorf(fmt.Sprintf("hosts[%d].nodeName", i), "node name %q is the name of host %d; names and node names must each name one host", h.NodeName, j+1)
		}
	}
	v.controlPlanes(controlPlanes)
}

// hostsSeen are the hosts' names, node names, SSH addresses (address:port) and internal addresses met so
// far, each with the index of the first host that has it.
type hostsSeen struct {
	names, nodeNames, addrs, internal map[string]int
}

// hostIdentity checks a host's name, addresses and node name, each one host's only.
func (v *validator) hostIdentity(k string, i int, h *Host, seen *hostsSeen) {
	inv := v.inv
	switch first, dup := seen.names[h.Name]; {
	case h.Name == "":
		v.errorf(k+".name", "every host needs a name")
	case !nameRE.MatchString(h.Name):
		v.errorf(k+".name", "%q is not a host name clusterctl accepts (letters, digits, '.', '_' and '-')", h.Name)
	case dup:
		v.errorf(k+".name", "host %q is defined twice (first as host %d)", h.Name, first+1)
	default:
		seen.names[h.Name] = i
	}
	if msg := checkAddress(h.Address); msg != "" {
		v.errorf(k+".address", "%q %s", h.Address, msg)
	} else if msg := checkNodeIP(h.Address, !v.written(k+".internalAddress")); msg != "" {
		v.errorf(k+".address", "%s %s", h.Address, msg)
	} else {
		at := fmt.Sprintf("%s:%d", strings.ToLower(h.Address), inv.Port(h))
		if first, dup := seen.addrs[at]; dup {
			v.errorf(k+".address", "%q is also the address of host %q", h.Address, inv.Hosts[first].Name)
		} else {
			seen.addrs[at] = i
		}
	}
	if h.InternalAddress != "" && (h.InternalAddress != h.Address || v.written(k+".internalAddress")) {
		for _, a := range splitAddresses(h.InternalAddress) {
			if msg := checkIP(a); msg != "" {
				v.errorf(k+".internalAddress", "%q %s", a, msg)
				continue
			}
			if msg := checkNodeIP(a, true); msg != "" {
				v.errorf(k+".internalAddress", "%s %s", a, msg)
				continue
			}
			ip := netip.MustParseAddr(a).String()
			if first, dup := seen.internal[ip]; dup && first != i {
				v.errorf(k+".internalAddress", "%s is also the internal address of host %q", ip, inv.Hosts[first].Name)
			} else {
				seen.internal[ip] = i
			}
		}
	}
	if errs := validation.IsDNS1123Subdomain(h.NodeName); len(errs) > 0 {
		v.errorf(k+".nodeName", "%q is not a valid Kubernetes node name: %s", h.NodeName, dnsRule)
	} else if first, dup := seen.nodeNames[h.NodeName]; dup && (h.NodeName != h.Name || seen.names[h.Name] != first) {
		v.errorf(k+".nodeName", "node name %q is also the node name of host %q", h.NodeName, inv.Hosts[first].Name)
	} else {
		seen.nodeNames[h.NodeName] = i
	}
}

// controlPlanes checks the number of control-plane hosts (n) and etcd members.
func (v *validator) controlPlanes(n int) {
	inv := v.inv
	rolesFailed := false
	for i := range inv.Hosts {
		rolesFailed = rolesFailed || inv.failed[fmt.Sprintf("hosts[%d].roles", i)] || inv.failed[fmt.Sprintf("hosts[%d]", i)]
	}
	switch {
	case n == 0 && rolesFailed:
	case n == 0 && inv.Format != FormatNative:
		inv.pos["controlPlaneGroup"] = inv.pos[""]
		if g, ok := inv.pos["group.kube_control_plane"]; ok {
			inv.pos["controlPlaneGroup"] = g
		}
		v.errorf("controlPlaneGroup", "no host is in group kube_control_plane: add the hosts that run etcd and the control plane to it (kube-master and kube_master are read too)")
	case n == 0:
		v.errorf("hosts", "no host has the control-plane role: give one (or three) of them roles: [%s]", RoleControlPlane)
	case len(inv.EtcdHosts())%2 == 0:
		m := len(inv.EtcdHosts())
		what := "control-plane hosts"
		if inv.ExternalEtcd() {
			what = "etcd hosts"
		}
		v.report(Warning, "hosts", "%d %s: etcd needs a majority, so %d members tolerate no more failures than %d; use an odd number",
			m, what, m, m-1)
	}
	if n > 1 && inv.Cluster.ControlPlaneEndpoint == "" {
		v.report(Notice, "cluster.controlPlaneEndpoint", "not set with %d control-plane hosts: a node-local API proxy will run on every node and balance over all API servers", n)
	}
}

func (v *validator) roles(k string, h *Host) {
	if len(h.Roles) == 0 {
		v.errorf(k+".roles", "give the host at least one role: %s, %s or %s", RoleControlPlane, RoleWorker, RoleEtcd)
	}
	seen := map[Role]bool{}
	for j, r := range h.Roles {
		switch {
		case r != RoleControlPlane && r != RoleWorker && r != RoleEtcd:
			v.errorf(fmt.Sprintf("%s.roles[%d]", k, j), "%q is not a role; use %s, %s or %s", r, RoleControlPlane, RoleWorker, RoleEtcd)
		case seen[r]:
			v.errorf(fmt.Sprintf("%s.roles[%d]", k, j), "role %q is given twice", r)
		}
		seen[r] = true
	}
}

func (v *validator) labelsAndTaints(labelsKey, taintsKey string, labels map[string]string, taints []Taint) {
	for key, val := range labels {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			v.errorf(labelsKey+"."+key, "%q is not a label key: %s", key, brief(errs[0]))
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			v.errorf(labelsKey+"."+key, "%q is not a label value: %s", val, brief(errs[0]))
		}
	}
	for j, t := range taints {
		tk := fmt.Sprintf("%s[%d]", taintsKey, j)
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			v.errorf(tk+".key", "%q is not a taint key: %s", t.Key, brief(errs[0]))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			v.errorf(tk+".value", "%q is not a taint value: %s", t.Value, brief(errs[0]))
		}
		switch t.Effect {
		case "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			v.errorf(tk+".effect", "%q is not a taint effect (NoSchedule, PreferNoSchedule, NoExecute)", t.Effect)
		}
	}
}

func (v *validator) portNumber(key string, p int) {
	if p < 1 || p > 65535 {
		v.errorf(key, "port %d is outside 1-65535", p)
	}
}

func (v *validator) port(key, s string) {
	p, err := strconv.Atoi(s)
	if err != nil {
		v.errorf(key, "port %q is not a number", s)
		return
	}
	v.portNumber(key, p)
}

// checkNodeIP returns "" when s is not an IP address, or is one a host may have in the cluster, else what
// is wrong with it. Unspecified, multicast and broadcast addresses are no host's; loopback and link-local
// ones (reachable from no other host, or only with a zone) are refused as a node's address (asNode): an
// SSH address may be a loopback one (a tunnel) when internalAddress gives the node's.
func checkNodeIP(s string, asNode bool) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return ""
	}
	switch a = a.Unmap(); {
	case a.IsUnspecified():
		return "is the unspecified address: give the host's own address"
	case a.IsMulticast():
		return "is a multicast address: give the host's own address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "is the broadcast address: give the host's own address"
	case asNode && a.IsLoopback():
		return "is a loopback address, which no other node can reach: give the host's address on the cluster's network (or, to reach it over SSH through a tunnel, that address as internalAddress)"
	case asNode && (a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()):
		return "is a link-local address (169.254.0.0/16, fe80::/10), which is not routed: give a global or unique-local one"
	}
	return ""
}

var dottedQuadRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+){3}$`)

// checkAddress returns "" for an IP address or DNS name, else what is wrong with it.
func checkAddress(s string) string {
	if s == "" {
		return "is empty; give an IP address or DNS name"
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return checkIP(s)
	}
	if dottedQuadRE.MatchString(s) {
		return "is not a valid IPv4 address"
	}
	if strings.Contains(s, ":") {
		return "is not a valid IPv6 address"
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(strings.TrimSuffix(s, "."))); len(errs) > 0 {
		return "is not an IP address or DNS name"
	}
	return ""
}

// splitHostPort splits HOST[:PORT] (IPv6 in brackets when a port follows).
func splitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", fmt.Errorf("%q: missing ']'", s)
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", fmt.Errorf("%q: expected HOST:PORT", s)
		}
		return host, rest[1:], nil
	}
	if strings.Count(s, ":") > 1 {
		return s, "", nil // a bare IPv6 address
	}
	host, port, _ = strings.Cut(s, ":")
	if strings.HasSuffix(s, ":") {
		return "", "", fmt.Errorf("%q: port is missing after ':'", s)
	}
	return host, port, nil
}

// schema checks the file's apiVersion and kind: a version this clusterctl does not know was written by a
// newer one (or mistyped); reading it as this version could drop what it says.
func (v *validator) schema() {
	if v.inv.APIVersion != APIVersion {
		v.errorf("apiVersion", "%q is not a version of hosts.yaml this clusterctl reads (%s): a newer clusterctl wrote it, or it is mistyped", v.inv.APIVersion, APIVersion)
	}
	if v.inv.Kind != Kind {
		v.errorf("kind", "%q is not %s: this file is a clusterctl inventory, kind %s", v.inv.Kind, Kind, Kind)
	}
}
