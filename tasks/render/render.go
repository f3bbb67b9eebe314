// Package render computes, on the workstation, every file each host receives: the PKI from the state
// directory (made or kept there), kubeconfigs, static Pod manifests, the kubelet's configuration and unit,
// the containerd configuration and kernel settings. Nothing here touches a host; `clusterctl render` writes
// the result to a directory, `clusterctl up` pushes it.
package render

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/kubeconfig"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/snapshots"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/templates"
	"github.com/clusterctl/clusterctl/transport"
)

// Options say what to render from.
type Options struct {
	Inv      *inventory.Inventory
	StateDir string
	Now      func() time.Time
	// Renew issues anew, in the state directory, the leaves and kubeconfigs issued before its time.
	Renew *Renewal
	// Images are the cluster's images (images.For the inventory's version when empty; an artifacts
	// directory's own when one is used).
	Images images.Set
	// KubeletPath is where the kubelet binary is on hosts: /usr/bin/kubelet from packages,
	// /usr/local/bin/kubelet when clusterctl pushes it from an artifacts directory.
	KubeletPath string
	// NodeIPs are node addresses learned from the hosts, for hosts whose inventory has none: one of each
	// family the cluster has (see inventory.Host.NodeIPs).
	NodeIPs map[string]inventory.NodeAddrs
	// Containerized hosts cannot raise OOM score adjustments; containerd must be told.
	Containerized map[string]bool
	// CNIBinDir is where the CNI plugins are on hosts (/opt/cni/bin upstream, /usr/lib/cni on Debian).
	CNIBinDir string
	// NetworkFiles are the pod network's files every node gets (network.Plugin.NodeFiles).
	NetworkFiles []network.File
	// Registry, when set, is the private registry hosts pull images from.
	Registry *Registry
	// InstallRuntime: clusterctl installs containerd 2 (and runc, the CNI plugins) from the artifacts;
	// its unit and a configuration of containerd 2's format are rendered. Otherwise the host's own
	// containerd (1.6 or later) gets a configuration of the format every version reads.
	InstallRuntime bool
	// ControlPlanes names the control-plane hosts the cluster has or gets in this run; nil: every
	// control-plane host of the inventory. Others (listed, not joined, not joining) are left out: they get
	// no files and are neither proxy backends nor etcd peers.
	ControlPlanes []string
	// EtcdJoin, with external etcd, gives for each etcd host joining a running etcd cluster the members it
	// joins (added to the cluster before it starts). Hosts not in it make a new cluster with every other
	// such host: all of them when it is nil (up from nothing).
	EtcdJoin map[string][]manifests.EtcdMember
	// EtcdMembers are the etcd hosts whose member is in the running cluster: they get no initial-cluster
	// file (etcd reads none once it has data; the one they started with stays).
	EtcdMembers []string
	// EtcdIDs are, under profile cis, the user and group IDs etcd runs as on each host with a member (the
	// host's etcd user's, or those setup makes it with: tasks.Accounts.EtcdIDs).
	EtcdIDs map[string][2]int
	// Hostnames are the hosts' hostnames (their facts).
	Hostnames map[string]string
}

// ControlPlanes are the inventory's control-plane hosts among names (all of them when names is nil).
func ControlPlanes(inv *inventory.Inventory, names []string) []*inventory.Host {
	var out []*inventory.Host
	for _, h := range inv.ControlPlanes() {
		if names == nil || slices.Contains(names, h.Name) {
			out = append(out, h)
		}
	}
	return out
}

// Renewal is what certs rotate asks for: certificates issued before IssuedBefore are issued anew, with
// new keys when NewKeys; Only limits it to these certificates (leaf names such as apiserver or
// etcd-server, kubeconfig files such as admin.conf).
type Renewal struct {
	IssuedBefore time.Time
	NewKeys      bool
	Only         []string
}

func (r *Renewal) wants(name string, notBefore time.Time) bool {
	return r != nil && notBefore.Before(r.IssuedBefore) && (len(r.Only) == 0 || slices.Contains(r.Only, name))
}

// PKIAnnotation on each static Pod is a digest of the certificates, keys and kubeconfigs it reads: when they
// change (rotation), its manifest changes and the kubelet restarts it with them; the others stay up.
const PKIAnnotation = "clusterctl.dev/pki-sha256"

// Result is every host's files, in inventory order, and the workstation's.
type Result struct {
	Hosts       []HostFiles
	Workstation []transport.File
	Changes     []pki.Change
	// Endpoint is the URL the workstation reaches the API server at.
	Endpoint string
	// NodeEndpoint is the URL nodes reach it at: Endpoint, or the node-local proxy
	// (https://127.0.0.1:7443) when several control-plane nodes have no controlPlaneEndpoint in front.
	NodeEndpoint string
	// EtcdServers are the client URLs of an external etcd cluster's members (every API server's
	// --etcd-servers); empty when etcd is stacked.
	EtcdServers []string
	// ExternalCA: the state directory has the cluster CA's certificate without its key.
	ExternalCA bool
	// KubeletConfig is the cluster's kubelet configuration (kube-system/kubelet-config): clusterctl's with
	// cluster.kubelet.config merged in; a host with settings of its own or of its groups runs its own.
	KubeletConfig []byte
}

// Registry is how hosts reach the private registry they pull images from.
type Registry struct {
	// Host is the registry's host[:port].
	Host string
	// CA is its CA certificate (PEM), when hosts do not trust its issuer: containerd gets a hosts.toml.
	CA []byte
	// Username and Password, when set, go to the kubelet's /var/lib/kubelet/config.json (0600), which
	// the kubelet passes to the runtime with each pull, static Pods' included.
	Username, Password string
}

// HostFiles are one host's files.
type HostFiles struct {
	Host  string
	Files []transport.File
}

// The modes files get, as kubeadm writes them.
const (
	modeSecret = 0o600
	modePublic = 0o644
)

// Render makes or loads the PKI in the state directory and computes every host's files.
func Render(o Options) (*Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Images.Repository == "" {
		o.Images = images.For(o.Inv.Cluster.ImageRepository, o.Inv.Cluster.KubernetesVersion)
	}
	if o.KubeletPath == "" {
		o.KubeletPath = kubeadm.PackagedKubelet
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/opt/cni/bin"
	}
	r := &renderer{o: o, c: o.Inv.Cluster, cps: ControlPlanes(o.Inv, o.ControlPlanes)}
	if len(r.cps) == 0 {
		return nil, errors.New("no control-plane host")
	}
	if o.Inv.ExternalEtcd() {
		r.etcd = o.Inv.EtcdHosts()
	}
	if err := r.ensurePKI(r.endpoints()); err != nil {
		return nil, err
	}
	if err := r.common(); err != nil {
		return nil, err
	}
	if err := r.hardening(); err != nil {
		return nil, err
	}
	for _, m := range r.etcd {
		r.res.EtcdServers = append(r.res.EtcdServers, kubeadm.EtcdClientURL(r.nodeIP(m)))
	}
	for i := range o.Inv.Hosts {
		h := &o.Inv.Hosts[i]
		if h.Has(inventory.RoleControlPlane) && !slices.Contains(r.cps, h) {
			continue // not in the cluster, not joining it in this run
		}
		if !h.IsNode() && !slices.Contains(r.etcd, h) {
			continue
		}
		files, err := r.hostFiles(h)
		if err != nil {
			return nil, err
		}
		r.res.Hosts = append(r.res.Hosts, HostFiles{Host: h.Name, Files: files})
	}
	return r.res, nil
}

// renderer is one Render: what every host's files are made from.
type renderer struct {
	o          Options
	c          inventory.Cluster
	cps        []*inventory.Host
	etcd       []*inventory.Host // the hosts of an external etcd cluster; nil: etcd is stacked
	res        *Result
	localProxy bool
	issuer     *pki.Issuer
	pki        *pki.PKI
	tr         *trust
	// files every node gets the same, and the admin kubeconfigs control-plane nodes get
	kubeletConfig, unit, dropIn, sysctl, modules, containerdUnit []byte
	admin, superAdmin                                            []byte
	// kubeletBase is clusterctl's kubelet configuration, before any of the inventory's kubelet settings.
	kubeletBase *kubeletv1beta1.KubeletConfiguration
	// apiServerFiles are the API server's configuration files (encryption, audit, admission), the same
	// on every control-plane node.
	apiServerFiles []transport.File
}

// nodeAddr is the host's address in the cluster (inventory.Host.NodeIP); nodeIP is it as the text files
// hold, "" when it is not known.
func (r *renderer) nodeAddr(h *inventory.Host) netip.Addr { return h.NodeIP(r.o.NodeIPs[h.Name]) }
func (r *renderer) nodeIP(h *inventory.Host) string       { return inventory.AddrText(r.nodeAddr(h)) }

// otherIPs are a dual-stack node's addresses other than its primary one (inventory.Host.NodeIPs).
func (r *renderer) otherIPs(h *inventory.Host) []net.IP {
	var out []net.IP
	for _, a := range h.NodeIPs(r.o.NodeIPs[h.Name])[1:] {
		out = append(out, inventory.NetIP(a))
	}
	return out
}

// endpoints are the API endpoint (controlPlaneEndpoint, else the first control-plane node) and the one
// nodes use (the node-local proxy's, with several API servers and no endpoint); it returns the host the API
// server's certificate must name besides the nodes.
func (r *renderer) endpoints() (sanHost string) {
	c := r.c
	endpointHost, endpointPort := r.nodeIP(r.cps[0]), c.APIServer.BindPort
	if c.ControlPlaneEndpoint != "" {
		host, port, err := net.SplitHostPort(c.ControlPlaneEndpoint)
		if err != nil {
			host, port = c.ControlPlaneEndpoint, ""
		}
		endpointHost = strings.Trim(host, "[]")
		if port != "" {
			endpointPort, _ = strconv.Atoi(port)
		}
	}
	r.res = &Result{Endpoint: "https://" + net.JoinHostPort(endpointHost, strconv.Itoa(endpointPort))}
	r.res.NodeEndpoint = r.res.Endpoint
	r.localProxy = LocalProxyOf(r.o.Inv, r.o.ControlPlanes)
	if r.localProxy {
		r.res.NodeEndpoint = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(LocalProxyPort))
	}
	switch {
	case c.ControlPlaneEndpoint != "":
		return endpointHost
	case r.localProxy:
		return "127.0.0.1" // the API servers are reached through each node's proxy on loopback
	}
	return ""
}

// ensurePKI makes or keeps, in the state directory, the CAs and every control-plane node's certificates.
func (r *renderer) ensurePKI(sanHost string) error {
	c := r.c
	var pkiNodes []pki.Node
	for _, h := range r.cps {
		ip := inventory.NetIP(r.nodeAddr(h))
		if ip == nil {
			return fmt.Errorf("control-plane host %s: its node address is not known: set internalAddress in the inventory", h.Name)
		}
		kind := pki.ControlPlaneAndEtcd
		if r.etcd != nil && !slices.Contains(r.etcd, h) {
			kind = pki.ControlPlaneOnly
		}
		pkiNodes = append(pkiNodes, pki.Node{Name: h.NodeName, IP: ip, OtherIPs: r.otherIPs(h), Kind: kind})
	}
	for _, h := range r.etcd {
		if slices.Contains(r.cps, h) {
			continue
		}
		ip := inventory.NetIP(r.nodeAddr(h))
		if ip == nil {
			return fmt.Errorf("etcd host %s: its address is not known: set internalAddress in the inventory", h.Name)
		}
		pkiNodes = append(pkiNodes, pki.Node{Name: h.NodeName, IP: ip, Kind: pki.EtcdOnly})
	}
	r.issuer = &pki.Issuer{Now: r.o.Now, Algorithm: pki.Algorithm(c.Certificates.KeyAlgorithm),
		Validity: c.Certificates.Validity.Duration, CAValidity: c.Certificates.CAValidity.Duration}
	store := &pki.Store{Dir: filepath.Join(r.o.StateDir, "pki"), Issuer: r.issuer}
	if o := r.o.Renew; o != nil {
		store.RenewIssuedBefore, store.NewKeys, store.RenewOnly = o.IssuedBefore, o.NewKeys, o.Only
	}
	p, changes, err := store.Ensure(pki.Cluster{DNSDomain: c.Networking.DNSDomain, ServiceSubnet: c.Networking.ServiceSubnet,
		EndpointHost: sanHost, CertSANs: c.APIServer.CertSANs}, pkiNodes)
	if err != nil {
		return err
	}
	r.pki, r.res.Changes = p, changes
	r.res.ExternalCA = p.CAs["ca"].Key == nil
	r.tr, err = trustOf(store, p)
	return err
}

// common makes the files every node gets the same, and the admin kubeconfigs: the admin identities are the
// cluster's, kept in the state directory; the workstation gets admin.conf.
func (r *renderer) common() error {
	c, o := r.c, r.o
	clusterDNS, err := kubelet.NthIP(inventory.FirstRange(c.Networking.ServiceSubnet), 10)
	if err != nil {
		return err
	}
	r.kubeletBase = kubelet.Config(kubelet.Params{ClusterDNS: clusterDNS, ClusterDomain: c.Networking.DNSDomain,
		ContainerRuntimeEndpoint: c.ContainerRuntimeEndpoint, FailCgroupV1: c.Kubelet.FailCgroupV1, CIS: c.Security.CIS()})
	if r.kubeletConfig, err = r.kubeletFor(c.Kubelet.Config); err != nil {
		return err
	}
	r.res.KubeletConfig = r.kubeletConfig
	if r.unit, err = kubelet.Unit(o.KubeletPath); err != nil {
		return err
	}
	if r.dropIn, err = kubelet.DropIn(o.KubeletPath); err != nil {
		return err
	}
	ipv6 := slices.Contains(c.Networking.Families(), inventory.IPv6)
	if r.sysctl, err = templates.Render("sysctl.conf", map[string]any{"IPv6": ipv6, "KernelDefaults": r.kernelDefaults()}); err != nil {
		return err
	}
	if r.modules, err = templates.Render("modules.conf", nil); err != nil {
		return err
	}
	if r.containerdUnit, err = templates.Render("containerd.service", map[string]any{"Containerd": kubeadm.RuntimeBinary("containerd")}); err != nil {
		return err
	}
	ca, caPEM := r.pki.CAs["ca"], r.tr.bundle["ca"]
	adminID := kubeconfig.Identities("", r.res.Endpoint, "", true)
	if r.admin, err = ensureKubeconfig(filepath.Join(o.StateDir, "admin.conf"), c.Name, adminID[0], ca, caPEM, r.issuer, o.Renew, &r.res.Changes); err != nil {
		return err
	}
	if r.superAdmin, err = ensureKubeconfig(filepath.Join(o.StateDir, "kubeconfig", "super-admin.conf"), c.Name, adminID[len(adminID)-1], ca, caPEM, r.issuer, o.Renew, &r.res.Changes); err != nil {
		return err
	}
	r.res.Workstation = []transport.File{{Path: "/admin.conf", Data: r.admin, Mode: modeSecret}}
	return nil
}

// hostFiles are one host's files, sorted by path.
func (r *renderer) hostFiles(h *inventory.Host) ([]transport.File, error) {
	c, o := r.c, r.o
	var files []transport.File
	add := func(p string, data []byte, mode fs.FileMode) {
		files = append(files, transport.File{Path: p, Data: data, Mode: mode})
	}
	ip := r.nodeIP(h)
	if !h.IsNode() {
		if err := r.etcdMemberFiles(h, ip, &files, add); err != nil {
			return nil, err
		}
		if err := r.snapshotFiles(h, add); err != nil {
			return nil, err
		}
		files = r.etcdKeys(h, files)
		sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
		return files, nil
	}
	flags, err := kubelet.Flags(h.NodeIPs(o.NodeIPs[h.Name]).String(), h.NodeName, r.hostnameOverride(h), c.Kubelet.ExtraArgs.Pairs())
	if err != nil {
		return nil, err
	}
	containerdTemplate := "containerd-config.toml"
	if o.InstallRuntime {
		containerdTemplate = "containerd-config-v3.toml"
		add(kubeadm.ContainerdUnit, r.containerdUnit, modePublic)
		add(kubeadm.CrictlConfig, []byte("# Managed by clusterctl: crictl talks to the containerd clusterctl installed.\nruntime-endpoint: "+c.ContainerRuntimeEndpoint+"\n"), modePublic)
	}
	containerd, err := templates.Render(containerdTemplate, map[string]any{
		"SandboxImage": o.Images.TagRef(images.Pause), "RestrictOOMScoreAdj": o.Containerized[h.Name], "CNIBinDir": o.CNIBinDir, "Runc": kubeadm.Runc})
	if err != nil {
		return nil, err
	}
	km := r.kubeletMode()
	kc := r.kubeletConfig
	if s := o.Inv.NodeSettings(h); len(s.Kubelet) > 0 {
		if kc, err = r.kubeletFor(s.Kubelet); err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
	}
	add(kubeadm.KubeletConfig, kc, km)
	add(kubeadm.KubeletFlags, flags, km)
	add(kubeadm.KubeletInstanceConfig, kubelet.InstanceConfig(c.ContainerRuntimeEndpoint), km)
	add(kubeadm.KubeletUnit, r.unit, km)
	add(kubeadm.KubeletDropIn, r.dropIn, km)
	add(kubeadm.ContainerdConfig, containerd, modePublic)
	if err := registryFiles(o.Registry, add); err != nil {
		return nil, err
	}
	add(kubeadm.SysctlConfig, r.sysctl, modePublic)
	add(kubeadm.ModulesConfig, r.modules, modePublic)
	add(kubeadm.CACert, r.tr.bundle["ca"], modePublic)
	for _, f := range o.NetworkFiles {
		add(f.Path, f.Data, f.Mode)
	}
	if r.localProxy {
		if err := proxyFiles(o, h.NodeName, add); err != nil {
			return nil, err
		}
	}
	if h.Has(inventory.RoleControlPlane) {
		if err := r.controlPlaneFiles(h, ip, h.Name == r.cps[0].Name, add); err != nil {
			return nil, err
		}
	}
	if slices.Contains(r.etcd, h) {
		if err := r.etcdMemberFiles(h, ip, &files, add); err != nil {
			return nil, err
		}
	}
	if err := r.snapshotFiles(h, add); err != nil {
		return nil, err
	}
	files = r.etcdKeys(h, files)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// snapshotFiles are an etcd member's scheduled snapshots (cluster.etcd.snapshots): its timer, service and
// script. Members are the control-plane hosts with stacked etcd, the etcd hosts with external etcd.
func (r *renderer) snapshotFiles(h *inventory.Host, add func(string, []byte, fs.FileMode)) error {
	s := r.c.Etcd.Snapshots
	member := h.Has(inventory.RoleControlPlane)
	if r.o.Inv.ExternalEtcd() {
		member = slices.Contains(r.etcd, h)
	}
	if s == nil || !member {
		return nil
	}
	files, err := snapshots.Files(s)
	if err != nil {
		return err
	}
	for _, f := range files {
		add(f.Path, f.Data, f.Mode)
	}
	return nil
}

// registryFiles are containerd's hosts.toml and CA for the private registry, and the kubelet's
// credentials for it.
func registryFiles(rg *Registry, add func(string, []byte, fs.FileMode)) error {
	if rg == nil {
		return nil
	}
	if len(rg.CA) > 0 {
		if _, err := pki.ParseCert(rg.CA); err != nil {
			return fmt.Errorf("cluster.registry.ca: %w", err)
		}
		dir := path.Join(kubeadm.ContainerdCertsDir, rg.Host)
		hosts, err := templates.Render("containerd-hosts.toml", map[string]any{"Host": rg.Host, "CA": path.Join(dir, "ca.crt")})
		if err != nil {
			return err
		}
		add(path.Join(dir, "hosts.toml"), hosts, modePublic)
		add(path.Join(dir, "ca.crt"), rg.CA, modePublic)
	}
	if rg.Username != "" {
		auth := base64.StdEncoding.EncodeToString([]byte(rg.Username + ":" + rg.Password))
		data, err := json.MarshalIndent(map[string]any{"auths": map[string]any{rg.Host: map[string]string{"auth": auth}}}, "", "  ")
		if err != nil {
			return err
		}
		add(kubeadm.KubeletRegistryAuth, append(data, '\n'), modeSecret)
	}
	return nil
}

// ensureKubeconfig keeps a kubeconfig of the state directory that is still right, or makes it anew.
// caPEM is the CA data it trusts (the CA, or during a CA rotation the bundle of old and new): a kubeconfig
// whose certificate is right but whose CA data differs is rewritten with the same certificate.
func ensureKubeconfig(file, cluster string, id kubeconfig.Identity, ca *pki.KeyPair, caPEM []byte, issuer *pki.Issuer, renew *Renewal, changes *[]pki.Change) ([]byte, error) {
	data, err := pki.ReadSecret(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	reason := "missing"
	if err == nil {
		kp, why := kubeconfig.Check(data, cluster, id, ca.Cert, caPEM, issuer.Now(), 0)
		switch {
		case kp != nil && renew.wants(filepath.Base(file), kp.Cert.NotBefore):
			reason = "renewal requested"
		case why == "":
			return data, nil
		case why == kubeconfig.OtherTrust:
			out, err := kubeconfig.Build(cluster, id, caPEM, kp)
			if err != nil {
				return nil, err
			}
			if err := statedir.WriteFile(file, out, modeSecret); err != nil {
				return nil, err
			}
			*changes = append(*changes, pki.Change{What: file, Action: "updated", Reason: why})
			return out, nil
		default:
			reason = why
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if ca.Key == nil {
		return nil, fmt.Errorf("external CA mode: %s must be provided (%s)", file, reason)
	}
	kp, err := issuer.NewLeaf(id.Spec(), ca, nil)
	if err != nil {
		return nil, err
	}
	out, err := kubeconfig.Build(cluster, id, caPEM, kp)
	if err != nil {
		return nil, err
	}
	if err := statedir.WriteFile(file, out, modeSecret); err != nil {
		return nil, err
	}
	action := "reissued"
	if reason == "missing" {
		action, reason = "created", ""
	}
	*changes = append(*changes, pki.Change{What: file, Action: action, Reason: reason})
	return out, nil
}

// trust is what the hosts trust and sign with: the CAs, or during a CA rotation (see pki.StageTrust and
// after) bundles of the old and new CAs, the signer the controller-manager uses, and the service-account
// signing key and verification keys.
type trust struct {
	bundle map[string][]byte // CA spec name -> PEM, the current CA first
	// signers are, during a CA rotation, the CAs the controller-manager signs with (by spec name: the
	// cluster CA and the kubelet serving CA), in files of their own (pki.SignerPath); nil outside one: it
	// signs with the CAs' own files, as kubeadm.
	signers map[string]*pki.KeyPair
	saKey   crypto.Signer
	saPub   []byte
}

func trustOf(store *pki.Store, p *pki.PKI) (*trust, error) {
	tr := &trust{bundle: map[string][]byte{}, saKey: p.SA}
	for name, kp := range p.CAs {
		tr.bundle[name] = pki.EncodeCert(kp.Cert)
	}
	pub, err := pki.EncodePublicKey(p.SA.Public())
	if err != nil {
		return nil, err
	}
	tr.saPub = pub
	rot, err := store.Rotation()
	if err != nil {
		return nil, err
	}
	if rot == nil || pki.RotationStage(rot) < pki.StageTrust || pki.RotationStage(rot) >= pki.StageFinish {
		// No rotation on the hosts (yet, or any more): the old service-account key stays accepted while
		// tokens it signed remain (see pki.RetiredSAKeyFile).
		retired, err := store.RetiredSAKey()
		if err != nil {
			return nil, err
		}
		tr.saPub = append(tr.saPub, retired...)
		return tr, nil
	}
	others, err := store.Others(rot)
	if err != nil {
		return nil, err
	}
	for name, kp := range others.CAs {
		tr.bundle[name] = append(tr.bundle[name], pki.EncodeCert(kp.Cert)...)
	}
	otherPub, err := pki.EncodePublicKey(others.SA.Public())
	if err != nil {
		return nil, err
	}
	tr.saPub = append(tr.saPub, otherPub...)
	// The controller-manager and the token signer sign with the current CA and key: the old ones until the
	// swap, the new ones from the reissue stage on, when every host trusts both (the trust stage). So the
	// reissue stage's restart of each controller-manager and API server (for their reissued certificates)
	// also switches their signers, and the sign stage restarts none of them.
	tr.signers = map[string]*pki.KeyPair{}
	for _, s := range pki.Signers() {
		tr.signers[s.Name] = p.CAs[s.Name]
	}
	return tr, nil
}
