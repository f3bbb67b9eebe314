package addons

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/hardening"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
	"github.com/clusterctl/clusterctl/tasks/manifests"
)

// ClusterParams are what the objects of a new cluster depend on.
type ClusterParams struct {
	Cluster      inventory.Cluster
	NodeEndpoint string // the API endpoint nodes use
	CAPEM        []byte
	// KubeletConfig is the kubelet configuration every node runs (kubelet-config).
	KubeletConfig []byte
	// Tokens are the bootstrap tokens of the hosts joining in the run, one each.
	Tokens []bootstrap.Token
	Images images.Set
	// Containerized hosts cannot tune conntrack: kube-proxy leaves it alone.
	Containerized bool
	// EtcdServers are the client URLs of an external etcd cluster; empty: stacked etcd.
	EtcdServers []string
	// ExternalCA: the cluster CA's key is not on the hosts (the controller-manager signs kubelet serving
	// certificates only).
	ExternalCA bool
}

// kubeadmArgs are the flags clusterctl gives the API server, controller-manager and scheduler beyond
// kubeadm's: they go into kubeadm-config's extraArgs too, so that `kubeadm upgrade` writes the same
// manifests. The controller-manager's signing flags empty kubeadm's --cluster-signing-cert-file/-key-file,
// which cannot be given beside the per-signer ones.
func kubeadmArgs(externalCA bool, c *inventory.Cluster) (apiServer, controllerManager, scheduler [][2]string) {
	pairs := pairsOf
	apiServer = append([][2]string{{"kubelet-certificate-authority", manifests.KubeletServingCAFile}},
		pairs(hardening.APIServerArgs(c))...)
	controllerManager = slices.Clone(manifests.ControllerManagerRate)
	controllerManager = append(controllerManager, pairs(manifests.SigningArgs("ca", manifests.KubeletServingCA, externalCA))...)
	controllerManager = append(controllerManager, pairs(hardening.ControllerManagerArgs(c.Security))...)
	return apiServer, controllerManager, pairs(hardening.SchedulerArgs(c.Security))
}

// pairsOf are flags as name-value pairs.
func pairsOf(args []manifests.Arg) [][2]string {
	out := make([][2]string, 0, len(args))
	for _, a := range args {
		out = append(out, [2]string{a.Name, a.Value})
	}
	return out
}

// kubeadmVolumes are the API server's mounts beyond kubeadm's (hardening's), as kubeadm-config's
// extraVolumes, then the inventory's.
func kubeadmVolumes(c inventory.Component) []bootstrap.Volume {
	var out []bootstrap.Volume
	for _, v := range hardening.APIServerVolumes() {
		out = append(out, bootstrap.Volume{Name: v.Name, HostPath: v.HostPath, MountPath: v.MountPath, ReadOnly: v.ReadOnly, PathType: string(v.Type)})
	}
	for _, v := range c.ExtraVolumes {
		out = slices.DeleteFunc(out, func(o bootstrap.Volume) bool { return o.Name == v.Name })
		out = append(out, bootstrap.Volume{Name: v.Name, HostPath: v.HostPath, MountPath: v.MountPath, ReadOnly: v.ReadOnly, PathType: v.PathType})
	}
	return out
}

// ClusterObjects are the objects up applies through the API once the first API server answers, as kubeadm
// init's upload-config, bootstrap-token and addon phases: the token, cluster-info (signed with it),
// kubeadm-config, kubelet-config, the RBAC of joining nodes, kube-proxy and CoreDNS.
func ClusterObjects(p ClusterParams) ([]runtime.Object, error) {
	c := p.Cluster
	apiArgs, cmArgs, schedArgs := kubeadmArgs(p.ExternalCA, &c)
	kc, err := bootstrap.KubeadmConfig(bootstrap.ClusterConfig{KubernetesVersion: c.KubernetesVersion, ClusterName: c.Name,
		ControlPlaneEndpoint: strings.TrimPrefix(p.NodeEndpoint, "https://"), PodSubnet: c.Networking.PodSubnet,
		ServiceSubnet: c.Networking.ServiceSubnet, DNSDomain: c.Networking.DNSDomain, ImageRepository: c.ImageRepository,
		EncryptionAlgorithm: c.Certificates.KeyAlgorithm, CertValidity: c.Certificates.Validity.Duration,
		CAValidity: c.Certificates.CAValidity.Duration, APIServerArgs: withDefaults(apiArgs, c.APIServer.ExtraArgs.Pairs()),
		ControllerManager: withDefaults(cmArgs, c.ControllerManager.ExtraArgs.Pairs()), SchedulerArgs: withDefaults(schedArgs, c.Scheduler.ExtraArgs.Pairs()),
		APIServerVolumes: kubeadmVolumes(c.APIServer.Component),
		EtcdArgs:         withDefaults(pairsOf(hardening.EtcdArgs(c.Security)), c.Etcd.ExtraArgs.Pairs()), CertSANs: c.APIServer.CertSANs,
		EtcdServers: p.EtcdServers})
	if err != nil {
		return nil, err
	}
	infoKC, err := bootstrap.ClusterInfoKubeconfig(p.NodeEndpoint, p.CAPEM)
	if err != nil {
		return nil, err
	}
	var objs []runtime.Object
	for _, t := range p.Tokens {
		objs = append(objs, t.Object())
	}
	info, err := bootstrap.ClusterInfo(infoKC)
	if err != nil {
		return nil, err
	}
	objs = append(objs, bootstrap.Objects(c.KubeadmJoin, kc, bootstrap.KubeletConfig(p.KubeletConfig), info)...)
	dnsIP, err := kubelet.NthIP(inventory.FirstRange(c.Networking.ServiceSubnet), 10)
	if err != nil {
		return nil, err
	}
	ap := Params{Endpoint: p.NodeEndpoint, ImageRepository: c.ImageRepository,
		KubeProxyImage: p.Images.Ref(images.Proxy), CoreDNSImage: p.Images.Ref(images.CoreDNS),
		ClusterCIDR: c.Networking.PodSubnet, DNSDomain: c.Networking.DNSDomain, DNSServiceIP: dnsIP,
		NoConntrackTuning: p.Containerized, KubeProxyArgs: c.KubeProxy.ExtraArgs.Pairs(),
		KubeProxyMode: c.KubeProxy.Mode}
	proxy, err := KubeProxy(ap)
	if err != nil {
		return nil, err
	}
	objs = append(objs, proxy...)
	return append(objs, CoreDNS(ap)...), nil
}

// withDefaults is defaults with the user's args after them, a user's arg of a default's name replacing it.
func withDefaults(defaults, user [][2]string) [][2]string {
	out := make([][2]string, 0, len(defaults)+len(user))
	for _, d := range defaults {
		if !slices.ContainsFunc(user, func(u [2]string) bool { return u[0] == d[0] }) {
			out = append(out, d)
		}
	}
	return append(out, user...)
}
