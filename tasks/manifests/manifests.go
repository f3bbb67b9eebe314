// Package manifests builds the control plane's static Pods as typed corev1.Pod values, with the flags
// current kubeadm gives each component (kube-apiserver, kube-controller-manager, kube-scheduler, etcd), the
// user's extra flags and volumes merged deterministically, and serializes them as kubeadm writes them.
package manifests

import (
	"crypto/sha256"
	"fmt"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/templates"
)

const (
	// healthCheckTimeout is how long startup probes give a component (kubeadm's default, 4 minutes).
	healthCheckTimeout = 240
)

// Arg is one flag, without its dashes.
type Arg struct{ Name, Value string }

// Volume is a host path mounted into a component.
type Volume struct {
	Name, HostPath, MountPath string
	ReadOnly                  bool
	Type                      corev1.HostPathType
}

// Component is what the user adds to one component.
type Component struct {
	ExtraArgs    []Arg
	ExtraVolumes []Volume
}

// EtcdMember is a member of the etcd cluster a new member joins.
type EtcdMember struct{ Name, PeerURL string }

// Params is everything the manifests of one control-plane node depend on.
type Params struct {
	ClusterName string
	Images      images.Set

	NodeName         string
	AdvertiseAddress string
	BindPort         int

	ServiceSubnet string // one range, or a dual-stack pair as kubeadm spells it
	PodSubnet     string // the same
	DNSDomain     string
	// NodeCIDRMaskSize and NodeCIDRMaskSizeIPv6 are the node ranges' prefix lengths out of the pod subnet's
	// IPv4 and IPv6 range.
	NodeCIDRMaskSize, NodeCIDRMaskSizeIPv6 int

	// ExternalCA: the CA key is not on the hosts; the controller-manager cannot sign client certificates.
	ExternalCA bool
	// Signer and ServingSigner are the file names, under the pki directory and without extension, of the
	// CAs the controller-manager signs with: kubelet serving certificates with ServingSigner
	// ("kubelet-serving-ca"), every other kind with Signer ("ca", kubeadm's ca.crt and ca.key). While a CA
	// rotation is under way the CAs' certificate files are bundles of the old and new CAs, and a signer must
	// be a single certificate: the signers are then other files.
	Signer, ServingSigner string

	// EtcdCluster is the members this node's etcd joins; empty for the first node (a new cluster).
	EtcdCluster []EtcdMember
	// EtcdNew, for a member of an external etcd cluster being made, is every member it is made with
	// (itself included): they start together (initial-cluster-state new).
	EtcdNew []EtcdMember
	// EtcdServers are the client URLs of an external etcd cluster's members, which the API server uses;
	// empty: its own stacked member on loopback.
	EtcdServers []string

	APIServer, ControllerManager, Scheduler, Etcd Component
	// EtcdUser is the user etcd runs as (profile cis); nil: root, as kubeadm runs it.
	EtcdUser *scripts.EtcdUser
}

// All returns the four static Pods of a control-plane node, by file name.
func All(p *Params) map[string]*corev1.Pod {
	return map[string]*corev1.Pod{
		"etcd.yaml":                    Etcd(p),
		"kube-apiserver.yaml":          APIServer(p),
		"kube-controller-manager.yaml": ControllerManager(p),
		"kube-scheduler.yaml":          Scheduler(p),
	}
}

func (p *Params) signer() string {
	if p.Signer == "" {
		return "ca"
	}
	return p.Signer
}

func (p *Params) servingSigner() string {
	if p.ServingSigner == "" {
		return KubeletServingCA
	}
	return p.ServingSigner
}

// KubeletServingCA is the file name, under the pki directory and without extension, of the CA that signs
// kubelet serving certificates (pki.KubeletServingCA): the API server verifies kubelets with it alone.
const KubeletServingCA = "kubelet-serving-ca"

// KubeletServingCAFile is the API server's --kubelet-certificate-authority.
var KubeletServingCAFile = path.Join(kubeadm.PKIDir, KubeletServingCA+".crt")

// clientSigners are the controller-manager's signers of client certificates (kubelets', and those asked
// for through the certificates API) and of the legacy-unknown signer name: each the cluster CA, as
// kubeadm's --cluster-signing-cert-file gives them. kubelet serving certificates have their own CA; the
// controller-manager takes either the one pair of flags for all signers or a pair per signer, never both.
var clientSigners = []string{"kube-apiserver-client", "kubelet-client", "legacy-unknown"}

// SigningArgs are the controller-manager's signing flags: the per-signer pairs, the one pair for all
// emptied (so that, in kubeadm-config's extraArgs, they also replace kubeadm's defaults). Without the
// cluster CA's key (ExternalCA) only kubelet serving certificates are signed.
func SigningArgs(signer, servingSigner string, externalCA bool) []Arg {
	pki := func(f string) string { return path.Join(kubeadm.PKIDir, f) }
	args := []Arg{{"cluster-signing-cert-file", ""}, {"cluster-signing-key-file", ""}}
	if !externalCA {
		for _, s := range clientSigners {
			args = append(args, Arg{"cluster-signing-" + s + "-cert-file", pki(signer + ".crt")},
				Arg{"cluster-signing-" + s + "-key-file", pki(signer + ".key")})
		}
	}
	return append(args, Arg{"cluster-signing-kubelet-serving-cert-file", pki(servingSigner + ".crt")},
		Arg{"cluster-signing-kubelet-serving-key-file", pki(servingSigner + ".key")})
}

func (p *Params) loopback() string {
	if ip := net.ParseIP(p.AdvertiseAddress); ip != nil && ip.To4() == nil {
		return "::1"
	}
	return "127.0.0.1"
}

func (p *Params) etcdServers() string {
	if len(p.EtcdServers) > 0 {
		return strings.Join(p.EtcdServers, ",")
	}
	return kubeadm.EtcdClientURL(p.loopback())
}

// APIServer is kube-apiserver's static Pod.
func APIServer(p *Params) *corev1.Pod {
	pki := func(f string) string { return path.Join(kubeadm.PKIDir, f) }
	args := []Arg{
		{"advertise-address", p.AdvertiseAddress},
		{"allow-privileged", "true"},
		{"authorization-mode", "Node,RBAC"},
		{"client-ca-file", pki("ca.crt")},
		{"enable-admission-plugins", "NodeRestriction"},
		{"enable-bootstrap-token-auth", "true"},
		{"etcd-cafile", pki("etcd/ca.crt")},
		{"etcd-certfile", pki("apiserver-etcd-client.crt")},
		{"etcd-keyfile", pki("apiserver-etcd-client.key")},
		{"etcd-servers", p.etcdServers()},
		{"kubelet-certificate-authority", KubeletServingCAFile},
		{"kubelet-client-certificate", pki("apiserver-kubelet-client.crt")},
		{"kubelet-client-key", pki("apiserver-kubelet-client.key")},
		{"kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname"},
		{"proxy-client-cert-file", pki("front-proxy-client.crt")},
		{"proxy-client-key-file", pki("front-proxy-client.key")},
		{"requestheader-allowed-names", "front-proxy-client"},
		{"requestheader-client-ca-file", pki("front-proxy-ca.crt")},
		{"requestheader-extra-headers-prefix", "X-Remote-Extra-"},
		{"requestheader-group-headers", "X-Remote-Group"},
		{"requestheader-username-headers", "X-Remote-User"},
		{"secure-port", strconv.Itoa(p.BindPort)},
		{"service-account-issuer", "https://kubernetes.default.svc." + p.DNSDomain},
		{"service-account-key-file", pki("sa.pub")},
		{"service-account-signing-key-file", pki("sa.key")},
		{"service-cluster-ip-range", p.ServiceSubnet},
		// Not set by kubeadm: on SIGTERM (a restart for new certificates) the API server fails /readyz
		// but keeps serving for this long, so that load balancers and the node-local proxies (checking
		// /readyz every 2 s) send new connections elsewhere before it stops; then, while in-flight
		// requests drain, it answers new ones on old connections with 429, Retry-After and Connection:
		// close, which clients retry elsewhere: rolling restarts without failed requests.
		{"shutdown-delay-duration", "10s"},
		{"shutdown-send-retry-after", "true"},
		{"tls-cert-file", pki("apiserver.crt")},
		{"tls-private-key-file", pki("apiserver.key")},
	}
	port := int32(p.BindPort)
	c := container("kube-apiserver", p.Images.Ref(images.APIServer), merge(args, p.APIServer.ExtraArgs), "250m")
	c.Ports = []corev1.ContainerPort{{Name: "probe-port", ContainerPort: port, Protocol: corev1.ProtocolTCP}}
	c.LivenessProbe = probe(p.AdvertiseAddress, "/livez", corev1.URISchemeHTTPS, 10, 8, 10)
	c.ReadinessProbe = probe(p.AdvertiseAddress, "/readyz", corev1.URISchemeHTTPS, 0, 3, 1)
	c.StartupProbe = readyStartupProbe(p.AdvertiseAddress, "/livez", corev1.URISchemeHTTPS)
	vols := append(caVolumes(), Volume{Name: "k8s-certs", HostPath: kubeadm.PKIDir, MountPath: kubeadm.PKIDir, ReadOnly: true, Type: corev1.HostPathDirectoryOrCreate})
	pod := podFor(c, merged(vols, p.APIServer.ExtraVolumes))
	pod.Annotations = map[string]string{
		"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": net.JoinHostPort(p.AdvertiseAddress, strconv.Itoa(p.BindPort)),
	}
	return pod
}

// ControllerManagerRate is the controller-manager's client rate; kubeadm leaves the defaults, 20 requests a
// second in bursts of 30. On a new cluster each of its ~45 controllers first gets a service account and
// its token, 2-4 requests each, one controller after the other: at 20 a second they queued 4-5 s in the
// client, and the CSR signers and node IPAM, which joining kubelets wait for, start only after the last.
// It goes into kubeadm-config's extraArgs too (kubeadm's upgrade keeps it); an inventory's
// controllerManager.extraArgs override it.
var ControllerManagerRate = [][2]string{{"kube-api-qps", "100"}, {"kube-api-burst", "200"}}

// ControllerManager is kube-controller-manager's static Pod: it signs kubelet client certificates with the
// cluster CA and their serving certificates with the kubelet serving CA, runs the bootstrap-token signer and cleaner, and allocates node pod ranges when a pod subnet is set.
func ControllerManager(p *Params) *corev1.Pod {
	pki := func(f string) string { return path.Join(kubeadm.PKIDir, f) }
	kubeconfig := path.Join(kubeadm.KubernetesDir, "controller-manager.conf")
	args := []Arg{
		{"authentication-kubeconfig", kubeconfig},
		{"authorization-kubeconfig", kubeconfig},
		{"bind-address", "127.0.0.1"},
		{"client-ca-file", pki("ca.crt")},
		{"cluster-name", p.ClusterName},
	}
	for _, a := range SigningArgs(p.signer(), p.servingSigner(), p.ExternalCA) {
		if a.Value != "" {
			args = append(args, a)
		}
	}
	args = append(args, []Arg{
		{"controllers", "*,bootstrapsigner,tokencleaner"},
		{"kubeconfig", kubeconfig},
		{"leader-elect", "true"},
		{"requestheader-client-ca-file", pki("front-proxy-ca.crt")},
		{"root-ca-file", pki("ca.crt")},
		{"service-account-private-key-file", pki("sa.key")},
		{"use-service-account-credentials", "true"},
	}...)
	for _, a := range ControllerManagerRate {
		args = setArg(args, a[0], a[1])
	}
	if p.PodSubnet != "" {
		args = setArg(args, "allocate-node-cidrs", "true")
		args = setArg(args, "cluster-cidr", p.PodSubnet)
		args = setArg(args, "service-cluster-ip-range", p.ServiceSubnet)
		for _, m := range nodeMasks(p) {
			args = setArg(args, m[0], m[1])
		}
	}
	c := container("kube-controller-manager", p.Images.Ref(images.ControllerManager), merge(args, p.ControllerManager.ExtraArgs), "200m")
	c.Ports = []corev1.ContainerPort{{Name: "probe-port", ContainerPort: kubeadm.PortControllerManager, Protocol: corev1.ProtocolTCP}}
	c.LivenessProbe = probe("127.0.0.1", "/healthz", corev1.URISchemeHTTPS, 10, 8, 10)
	c.StartupProbe = startupProbe("127.0.0.1", "/healthz", corev1.URISchemeHTTPS)
	vols := append(caVolumes(),
		Volume{Name: "k8s-certs", HostPath: kubeadm.PKIDir, MountPath: kubeadm.PKIDir, ReadOnly: true, Type: corev1.HostPathDirectoryOrCreate},
		Volume{Name: "kubeconfig", HostPath: kubeconfig, MountPath: kubeconfig, ReadOnly: true, Type: corev1.HostPathFileOrCreate},
		Volume{Name: "flexvolume-dir", HostPath: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
			MountPath: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", Type: corev1.HostPathDirectoryOrCreate},
	)
	return podFor(c, merged(vols, p.ControllerManager.ExtraVolumes))
}

// Scheduler is kube-scheduler's static Pod.
func Scheduler(p *Params) *corev1.Pod {
	kubeconfig := path.Join(kubeadm.KubernetesDir, "scheduler.conf")
	args := []Arg{
		{"authentication-kubeconfig", kubeconfig},
		{"authorization-kubeconfig", kubeconfig},
		{"bind-address", "127.0.0.1"},
		{"kubeconfig", kubeconfig},
		{"leader-elect", "true"},
	}
	c := container("kube-scheduler", p.Images.Ref(images.Scheduler), merge(args, p.Scheduler.ExtraArgs), "100m")
	c.Ports = []corev1.ContainerPort{{Name: "probe-port", ContainerPort: kubeadm.PortScheduler, Protocol: corev1.ProtocolTCP}}
	c.LivenessProbe = probe("127.0.0.1", "/livez", corev1.URISchemeHTTPS, 10, 8, 10)
	c.ReadinessProbe = probe("127.0.0.1", "/readyz", corev1.URISchemeHTTPS, 0, 3, 1)
	c.StartupProbe = readyStartupProbe("127.0.0.1", "/livez", corev1.URISchemeHTTPS)
	vols := []Volume{{Name: "kubeconfig", HostPath: kubeconfig, MountPath: kubeconfig, ReadOnly: true, Type: corev1.HostPathFileOrCreate}}
	return podFor(c, merged(vols, p.Scheduler.ExtraVolumes))
}

// EtcdFlags are an etcd member's command-line flags: TLS for clients and peers with the etcd CA, metrics and
// health on loopback, and the initial cluster (itself for the first stacked member, every member for a new
// external cluster, the existing members plus itself for a joining one). The stacked static Pod and the
// external member's unit run the same flags.
func EtcdFlags(p *Params) []string {
	pki := func(f string) string { return path.Join(kubeadm.PKIDir, "etcd", f) }
	host := p.AdvertiseAddress
	clientURL := kubeadm.EtcdClientURL(host)
	peerURL := kubeadm.EtcdPeerURL(host)
	lo := p.loopback()
	args := []Arg{
		{"advertise-client-urls", clientURL},
		{"cert-file", pki("server.crt")},
		{"client-cert-auth", "true"},
		{"data-dir", kubeadm.EtcdDataDir},
		{"feature-gates", "InitialCorruptCheck=true"},
		{"initial-advertise-peer-urls", peerURL},
		{"initial-cluster", p.NodeName + "=" + peerURL},
		{"key-file", pki("server.key")},
		{"listen-client-urls", kubeadm.EtcdClientURL(lo) + "," + clientURL},
		{"listen-metrics-urls", "http://" + net.JoinHostPort(lo, strconv.Itoa(kubeadm.PortEtcdMetrics))},
		{"listen-peer-urls", peerURL},
		{"name", p.NodeName},
		{"peer-cert-file", pki("peer.crt")},
		{"peer-client-cert-auth", "true"},
		{"peer-key-file", pki("peer.key")},
		{"peer-trusted-ca-file", pki("ca.crt")},
		{"snapshot-count", "10000"},
		{"trusted-ca-file", pki("ca.crt")},
		{"watch-progress-notify-interval", "5s"},
	}
	switch {
	case len(p.EtcdCluster) > 0:
		members := make([]string, 0, len(p.EtcdCluster)+1)
		for _, m := range p.EtcdCluster {
			members = append(members, m.Name+"="+m.PeerURL)
		}
		members = append(members, p.NodeName+"="+peerURL)
		args = setArg(args, "initial-cluster", strings.Join(members, ","))
		args = setArg(args, "initial-cluster-state", "existing")
	case len(p.EtcdNew) > 0:
		members := make([]string, 0, len(p.EtcdNew))
		for _, m := range p.EtcdNew {
			members = append(members, m.Name+"="+m.PeerURL)
		}
		args = setArg(args, "initial-cluster", strings.Join(members, ","))
		args = setArg(args, "initial-cluster-state", "new")
	}
	return merge(etcdUserArgs(p, args), p.Etcd.ExtraArgs)
}

// Etcd is the node's stacked etcd member (EtcdFlags) as a static Pod.
func Etcd(p *Params) *corev1.Pod {
	lo := p.loopback()
	clientURL := kubeadm.EtcdClientURL(p.AdvertiseAddress)
	c := container("etcd", p.Images.Ref(images.Etcd), EtcdFlags(p), "100m")
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("100Mi")
	c.Ports = []corev1.ContainerPort{{Name: "probe-port", ContainerPort: kubeadm.PortEtcdMetrics, Protocol: corev1.ProtocolTCP}}
	c.LivenessProbe = probe(lo, "/livez", corev1.URISchemeHTTP, 10, 8, 10)
	c.ReadinessProbe = probe(lo, "/readyz", corev1.URISchemeHTTP, 0, 3, 1)
	c.StartupProbe = startupProbe(lo, "/readyz", corev1.URISchemeHTTP)
	vols := []Volume{
		{Name: "etcd-certs", HostPath: path.Join(kubeadm.PKIDir, "etcd"), MountPath: path.Join(kubeadm.PKIDir, "etcd"), Type: corev1.HostPathDirectoryOrCreate},
		{Name: "etcd-data", HostPath: kubeadm.EtcdDataDir, MountPath: kubeadm.EtcdDataDir, Type: corev1.HostPathDirectoryOrCreate},
	}
	pod := podFor(c, merged(vols, p.Etcd.ExtraVolumes))
	pod.Annotations = map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": clientURL}
	etcdAsUser(p, pod)
	return pod
}

// EtcdUnit is an external etcd member's systemd unit: the artifacts' etcd binary run with EtcdFlags but the
// initial cluster's (EtcdInitialEnv has them), and pkiDigest (of the certificates it reads) in a comment, so
// that new certificates change the unit and the member is restarted with them.
func EtcdUnit(p *Params, binary, pkiDigest string) ([]byte, error) {
	words := []string{binary}
	for _, f := range EtcdFlags(p) {
		if !strings.HasPrefix(f, "--initial-cluster=") && !strings.HasPrefix(f, "--initial-cluster-state=") {
			words = append(words, f)
		}
	}
	cmd, err := templates.UnitArgs(words)
	if err != nil {
		return nil, fmt.Errorf("etcd's command line: %w", err)
	}
	return templates.Render("etcd.service", map[string]any{"ExecStart": cmd, "PKIDigest": pkiDigest, "InitialEnv": kubeadm.EtcdInitialEnv,
		"User": p.EtcdUser, "DataDir": kubeadm.EtcdDataDir})
}

// EtcdInitialEnv is the environment file of an external member's initial cluster (etcd's ETCD_INITIAL_*
// variables), which etcd reads only to make its data directory.
func EtcdInitialEnv(p *Params) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Managed by clusterctl: read by etcd only when its data directory is made.\n")
	for _, f := range EtcdFlags(p) {
		for flag, env := range map[string]string{"--initial-cluster=": "ETCD_INITIAL_CLUSTER", "--initial-cluster-state=": "ETCD_INITIAL_CLUSTER_STATE"} {
			if v, ok := strings.CutPrefix(f, flag); ok {
				if strings.ContainsAny(v, "\n\r\"'\\$` ") {
					return nil, fmt.Errorf("etcd's %s%q: not a value an environment file holds", flag, v)
				}
				b.WriteString(env + "=" + v + "\n")
			}
		}
	}
	return []byte(b.String()), nil
}

// caVolumes are the system trust stores control-plane components read (Debian and RHEL layouts).
// APIServerProxy is the node-local proxy to every API server (haproxy), a static Pod on every node of a
// cluster with several control-plane nodes and no controlPlaneEndpoint: as kubespray's and KubeKey's, it
// needs no package on the host, and the kubelet runs it before it can reach any API server. Its
// configuration is a host file; the Pod restarts when the file changes (the manifest carries its digest).
func APIServerProxy(image, config, configDigest string, port int) *corev1.Pod {
	const mount = "/usr/local/etc/haproxy/haproxy.cfg"
	c := corev1.Container{
		Name:            kubeadm.APIServerProxy,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		// -W (master-worker) -db (in the foreground), as haproxy's own image runs it: haproxy alone does not
		// catch SIGTERM, and as its container's PID 1 the kernel drops it, so every stop of the Pod (a
		// configuration change, a drain, a reboot's shutdown) waited for its kill; the master stops at once.
		Command: []string{"haproxy", "-W", "-db", "-f", mount},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("25m"), corev1.ResourceMemory: resource.MustParse("32M"),
		}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(port))}},
			InitialDelaySeconds: 10, TimeoutSeconds: 5, PeriodSeconds: 10, FailureThreshold: 3,
		},
	}
	pod := podFor(c, []Volume{{Name: "config", HostPath: config, MountPath: mount, ReadOnly: true, Type: corev1.HostPathFile}})
	pod.Labels = map[string]string{"component": kubeadm.APIServerProxy, "tier": "node"}
	pod.Annotations = map[string]string{"clusterctl.io/config-sha256": configDigest}
	return pod
}

func caVolumes() []Volume {
	ro := func(name, p string) Volume {
		return Volume{Name: name, HostPath: p, MountPath: p, ReadOnly: true, Type: corev1.HostPathDirectoryOrCreate}
	}
	return []Volume{
		ro("ca-certs", "/etc/ssl/certs"),
		ro("etc-ca-certificates", "/etc/ca-certificates"),
		ro("usr-local-share-ca-certificates", "/usr/local/share/ca-certificates"),
		ro("usr-share-ca-certificates", "/usr/share/ca-certificates"),
	}
}

// merge applies the user's flags over the defaults: a flag the user gives replaces the default in place,
// new flags follow in the user's order. The result is the command line, "--name=value".
func merge(defaults, extra []Arg) []string {
	args := append([]Arg{}, defaults...)
	for _, e := range extra {
		args = setArg(args, e.Name, e.Value)
	}
	out := make([]string, 0, len(args))
	for _, a := range args {
		out = append(out, "--"+a.Name+"="+a.Value)
	}
	return out
}

func setArg(args []Arg, name, value string) []Arg {
	for i := range args {
		if args[i].Name == name {
			args[i].Value = value
			return args
		}
	}
	return append(args, Arg{name, value})
}

// merged adds the user's volumes; one with the name of a default replaces it.
func merged(defaults, extra []Volume) []Volume {
	out := append([]Volume{}, defaults...)
	for _, e := range extra {
		replaced := false
		for i := range out {
			if out[i].Name == e.Name {
				out[i], replaced = e, true
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

func container(name, image string, args []string, cpu string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         append([]string{name}, args...),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu),
		}},
	}
}

// probe is an HTTP probe of the component's probe-port, with kubeadm's 15 s timeout.
// startupProbe is kubeadm's: first after 10 s, then every 10 s, for up to healthCheckTimeout. Sooner
// probes let etcd and the controller-manager (no readiness probe) start before their API server is up,
// and the kubelet then creates their mirror Pods only at its next sync, up to a minute later.
func startupProbe(host, p string, scheme corev1.URIScheme) *corev1.Probe {
	return probe(host, p, scheme, 10, healthCheckTimeout/10, 10)
}

// readyStartupProbe is the startup probe of a component with a readiness probe (the API server, the
// scheduler): every second from the container's start, so that its Pod is Ready about when the component
// is, not up to 10 s later (a rolling restart waits for each node's Pods). Its mirror Pod is not left
// behind: the component's readiness, which follows, is another Pod change the kubelet syncs, with its API
// server there.
func readyStartupProbe(host, p string, scheme corev1.URIScheme) *corev1.Probe {
	return probe(host, p, scheme, 0, healthCheckTimeout, 1)
}

func probe(host, p string, scheme corev1.URIScheme, delay, failures, period int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: host, Path: p, Port: intstr.FromString("probe-port"), Scheme: scheme,
		}},
		InitialDelaySeconds: delay, TimeoutSeconds: 15, FailureThreshold: failures, PeriodSeconds: period,
	}
}

// podFor wraps the container in a static Pod as kubeadm's ComponentPod does: kube-system, component and tier
// labels, system-node-critical, host network, the runtime's default seccomp profile. Volumes are sorted by
// name so that the output is the same bytes every time.
func podFor(c corev1.Container, vols []Volume) *corev1.Pod {
	sort.SliceStable(vols, func(i, j int) bool { return vols[i].Name < vols[j].Name })
	priority := int32(2000001000)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      c.Name,
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{"component": c.Name, "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			Priority:          &priority,
			PriorityClassName: "system-node-critical",
			HostNetwork:       true,
			SecurityContext:   &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		},
	}
	for _, v := range vols {
		t := v.Type
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.Name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.HostPath, Type: &t}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: v.MountPath, ReadOnly: v.ReadOnly})
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod
}

// Marshal writes a static Pod's manifest for a node as YAML (the API types carry JSON tags;
// sigs.k8s.io/yaml honours them), with a UID of its own: a digest of the manifest and the node's name.
// Without one the kubelet derives the UID from the Pod as its own version decodes and defaults it, so a
// kubelet of another minor version (an upgrade) sees new Pods and restarts every static Pod of the node:
// etcd, the control plane and the node-local API proxy at once. With it, the Pods restart only when their
// manifest changes (the kubelet's container hash is of the name and image only).
func Marshal(pod *corev1.Pod, nodeName string) ([]byte, error) {
	pod = pod.DeepCopy()
	pod.UID = ""
	out, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pod.Name, err)
	}
	sum := sha256.Sum256(append(append(out, 0), nodeName...))
	pod.UID = types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16]))
	if out, err = yaml.Marshal(pod); err != nil {
		return nil, fmt.Errorf("%s: %w", pod.Name, err)
	}
	return out, nil
}

// nodeMasks are the controller-manager's node mask flags: node-cidr-mask-size for a single-stack pod subnet
// (its family's mask), node-cidr-mask-size-ipv4 and -ipv6 for a dual-stack one.
func nodeMasks(p *Params) [][2]string {
	var v4, v6 bool
	for _, r := range strings.Split(p.PodSubnet, ",") {
		if strings.Contains(r, ":") {
			v6 = true
		} else {
			v4 = true
		}
	}
	mask := func(name string, n int) [][2]string {
		if n == 0 {
			return nil
		}
		return [][2]string{{name, strconv.Itoa(n)}}
	}
	switch {
	case v4 && v6:
		return append(mask("node-cidr-mask-size-ipv4", p.NodeCIDRMaskSize), mask("node-cidr-mask-size-ipv6", p.NodeCIDRMaskSizeIPv6)...)
	case v6:
		return mask("node-cidr-mask-size", p.NodeCIDRMaskSizeIPv6)
	}
	return mask("node-cidr-mask-size", p.NodeCIDRMaskSize)
}
