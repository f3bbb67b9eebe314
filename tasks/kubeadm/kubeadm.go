// Package kubeadm holds the layout of a node as kubeadm makes it, in one place: directories, file names and
// ports (cmd/kubeadm/app/constants upstream), and the files clusterctl adds beside them. Every package that
// writes, reads or checks one of these names it from here.
package kubeadm

import (
	"net"
	"path"
	"strconv"
)

// Directories.
const (
	KubernetesDir = "/etc/kubernetes"
	PKIDir        = KubernetesDir + "/pki"
	ManifestsDir  = KubernetesDir + "/manifests"
	EtcdDataDir   = "/var/lib/etcd"
	// EtcdKeysDir holds, under profile cis, the etcd member's own copies of its server and peer keys,
	// owned by the etcd user it runs as (those under PKIDir stay root's, 0600, as kubeadm has them).
	EtcdKeysDir = KubernetesDir + "/etcd-keys"
	KubeletDir  = "/var/lib/kubelet"
	// KubeletPKIDir is where the kubelet keeps the certificates it requests (TLS bootstrap, serving).
	KubeletPKIDir = KubeletDir + "/pki"
	// KubeletPodsDir holds a directory per Pod the kubelet runs, removed once it is done with the Pod.
	KubeletPodsDir = KubeletDir + "/pods"
	// BinDir is where binaries from an artifacts directory go; packages put theirs in /usr/bin.
	BinDir = "/usr/local/bin"
	// PackagedKubelet is where distributions' Kubernetes packages install the kubelet.
	PackagedKubelet = "/usr/bin/kubelet"
	// StateDir is clusterctl's own directory on a host: image archives, the applied-file stamps.
	StateDir = "/var/lib/clusterctl"
	// APIServerConfigDir holds the API server's configuration files beyond its flags (encryption at rest,
	// audit policy and webhook, admission configuration), 0600 on control-plane nodes only, mounted
	// read-only into its Pod.
	APIServerConfigDir = KubernetesDir + "/apiserver"
	// AuditLogDir holds each API server's audit log and its rotated copies.
	AuditLogDir = "/var/log/kubernetes/audit"
)

// The API server's configuration files (in APIServerConfigDir) and its audit log.
const (
	EncryptionConfig = APIServerConfigDir + "/encryption-config.yaml"
	AuditPolicy      = APIServerConfigDir + "/audit-policy.yaml"
	AuditWebhook     = APIServerConfigDir + "/audit-webhook.conf"
	AdmissionConfig  = APIServerConfigDir + "/admission-config.yaml"
	// AuthenticationConfig is the API server's structured authentication configuration (an OIDC
	// provider's).
	AuthenticationConfig = APIServerConfigDir + "/authentication-config.yaml"
	AuditLog             = AuditLogDir + "/audit.log"
)

// Files.
const (
	// KubeletKubeconfig is the kubelet's credentials: written by clusterctl on control-plane nodes, by the
	// kubelet itself on workers (TLS bootstrap).
	KubeletKubeconfig   = KubernetesDir + "/kubelet.conf"
	BootstrapKubeconfig = KubernetesDir + "/bootstrap-kubelet.conf"
	AdminKubeconfig     = KubernetesDir + "/admin.conf"
	SuperAdminConfig    = KubernetesDir + "/super-admin.conf"
	CACert              = PKIDir + "/ca.crt"

	KubeletConfig = KubeletDir + "/config.yaml"
	KubeletFlags  = KubeletDir + "/kubeadm-flags.env"
	// KubeletInstanceConfig is kubeadm's per-node part of the kubelet's configuration (the runtime endpoint):
	// the kubelet does not read it; kubeadm does (upgrade, certs, join) and merges it into config.yaml when
	// it writes that file.
	KubeletInstanceConfig = KubeletDir + "/instance-config.yaml"
	KubeletUnit           = "/etc/systemd/system/kubelet.service"
	KubeletDropIn         = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
	// KubeletClientCurrent and KubeletServerCurrent are the kubelet's current client and serving pairs.
	KubeletClientCurrent = KubeletPKIDir + "/kubelet-client-current.pem"
	KubeletServerCurrent = KubeletPKIDir + "/kubelet-server-current.pem"

	ContainerdConfig = "/etc/containerd/config.toml"
	// ContainerdUnit is the unit of the containerd clusterctl installs (it takes precedence over a
	// distribution's /lib/systemd/system/containerd.service).
	ContainerdUnit = "/etc/systemd/system/containerd.service"
	// ContainerdCertsDir holds containerd's per-registry hosts.toml (config_path).
	ContainerdCertsDir = "/etc/containerd/certs.d"
	// KubeletRegistryAuth is the Docker config the kubelet reads registry credentials from.
	KubeletRegistryAuth = KubeletDir + "/config.json"
	// CrictlConfig points crictl at the runtime clusterctl installs.
	CrictlConfig = "/etc/crictl.yaml"
	// CNIBinDir is where clusterctl installs the CNI plugins (upstream's place).
	CNIBinDir = "/opt/cni/bin"
	// Runc is where clusterctl installs runc (upstream's place); containerd is told its path.
	Runc = "/usr/local/sbin/runc"
	// APIServerProxyConfig is the node-local API proxy's configuration (haproxy's), read by its static Pod.
	APIServerProxyConfig = KubernetesDir + "/clusterctl-apiserver-proxy.cfg"
	// EtcdUnit runs a host's member of an external etcd cluster (the artifacts' etcd binary).
	EtcdUnit = "/etc/systemd/system/etcd.service"
	// EtcdInitialEnv holds the member's initial-cluster settings (ETCD_INITIAL_CLUSTER, ...), read by
	// etcd only when it has no data yet: kept out of the unit, so that a member added later changes no
	// other member's unit.
	EtcdInitialEnv = KubernetesDir + "/etcd-initial.env"
	SysctlConfig   = "/etc/sysctl.d/99-kubernetes.conf"
	ModulesConfig  = "/etc/modules-load.d/kubernetes.conf"

	// MemberPath marks a host as a node of one cluster: its name and the hash of its CA.
	MemberPath = KubernetesDir + "/clusterctl-cluster"
	// ImagesDir holds the image archives pushed from an artifacts directory.
	ImagesDir = StateDir + "/images"
	// StampsDir holds, per service, the digest of the files it last started with.
	StampsDir = StateDir + "/applied"
	// HostStamp is the stamp of the last run that left the host as its plan had it (apply.Stamp): the
	// plan's digest and the state of the files it wrote; a push empties it first.
	HostStamp = StateDir + "/stamp"
	// SysctlBefore holds the values the kernel settings of SysctlConfig had before up first applied them
	// (sysctl.conf syntax): reset puts them back.
	SysctlBefore = StateDir + "/sysctl-before"
	// VersionCache is where the setup script keeps the versions of the host's kubelet, containerd, crictl
	// and runc, by each binary's inode, size and change time, for the facts script.
	VersionCache = StateDir + "/versions"
)

// Ports of current Kubernetes (no insecure ports any more).
const (
	PortKubelet           = 10250
	PortControllerManager = 10257
	PortScheduler         = 10259
	PortEtcdClient        = 2379
	PortEtcdPeer          = 2380
	PortEtcdMetrics       = 2381
)

// EtcdPeerURL is the peer URL of the etcd member at ip (an IPv6 address in brackets).
func EtcdPeerURL(ip string) string {
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(PortEtcdPeer))
}

// EtcdClientURL is the client URL of the etcd member at ip.
func EtcdClientURL(ip string) string {
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(PortEtcdClient))
}

// The control-plane components, as their static Pods, manifests and images are named.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
)

// ControlPlaneComponents are the static Pods of a control-plane node, etcd first.
var ControlPlaneComponents = []string{Etcd, APIServer, ControllerManager, Scheduler}

// Manifest is the path of a component's static Pod manifest.
func Manifest(component string) string { return path.Join(ManifestsDir, component+".yaml") }

// Binary is the path of a binary pushed from an artifacts directory.
func Binary(name string) string { return path.Join(BinDir, name) }

// APIServerProxy is the node-local API proxy's static Pod name.
const APIServerProxy = "clusterctl-apiserver-proxy"

// RuntimeBinary is where a runtime binary from an artifacts directory is installed: runc in /usr/local/sbin,
// the others (containerd, its shim, ctr, crictl) in /usr/local/bin.
func RuntimeBinary(name string) string {
	if name == "runc" {
		return Runc
	}
	return path.Join(BinDir, name)
}

// CNIPlugin is where a CNI plugin from an artifacts directory is installed.
func CNIPlugin(name string) string { return path.Join(CNIBinDir, name) }
