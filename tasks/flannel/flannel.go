// Package flannel is cni.plugin flannel: flanneld (VXLAN backend, node ranges from the controller-manager
// through --kube-subnet-mgr) as a DaemonSet from an image of the artifacts, and on each node the standard
// bridge and host-local CNI plugins with the node's range and an MTU that leaves room for VXLAN's header.
// Pods of nodes on different subnets reach each other: their packets travel in UDP between the nodes'
// addresses, which the routers between them already route.
//
// Upstream's manifest (Documentation/kube-flannel.yml) installs a CNI plugin of flannel's own that reads
// flanneld's subnet.env and delegates to the bridge plugin; clusterctl knows each node's range and MTU and
// writes that bridge configuration itself, so nodes need only the standard CNI plugins.
package flannel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/bridge"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/transport"
)

// flanneld's image, at the release this package deploys: its name in an artifacts manifest, its version
// and its upstream reference.
const (
	ImageName = "flannel"
	Version   = "v0.28.10"
	Image     = "ghcr.io/flannel-io/flannel:" + Version
)

const (
	// Namespace is where upstream's manifest runs flanneld.
	Namespace = "kube-flannel"
	name      = "kube-flannel"
	// Network is the CNI network's name.
	Network = "clusterctl-flannel"
	// ConfigPath is each node's CNI configuration.
	ConfigPath = "/etc/cni/net.d/10-clusterctl-flannel.conflist"
	// Link is the VXLAN device flanneld makes; RunDir where it writes its subnet.env.
	Link = "flannel.1"
	// Link6 is its IPv6 VXLAN device, on a cluster with an IPv6 pod range.
	Link6  = "flannel-v6.1"
	RunDir = "/run/flannel"
	// Overhead is what VXLAN adds to a packet over IPv4 (outer IP, UDP, VXLAN and Ethernet headers): the
	// Pods' MTU is the node interface's minus it (IPv6 between the nodes: 70).
	Overhead   = 50
	Overhead6  = 70
	vxlanPort  = 8472
	minPodMTU  = 1280
	healthPort = 8081
)

// Plugin is cni.plugin flannel, with the Pods' MTU mtu (0: from each node's interface); ipv6: the cluster
// has an IPv6 range (flanneld tunnels it over IPv6, whose header takes more).
type Plugin struct {
	mtu  int
	ipv6 bool
}

// New is the plugin with the inventory's cni.mtu, for a cluster with an IPv6 range or not.
func New(mtu int, ipv6 bool) Plugin { return Plugin{mtu: mtu, ipv6: ipv6} }

func (Plugin) Images() []images.Image { return []images.Image{{Name: ImageName, Ref: Image}} }
func (Plugin) Binaries() []string     { return bridge.Binaries }
func (Plugin) Ready() bool            { return true }

// NodeFiles are the pod routes unit's: on flannel's nodes it holds only the Service rule (and the Service
// route of a host without a default route); flanneld makes the routes between nodes.
func (p Plugin) NodeFiles() []network.File { return bridge.UnitFiles(p.ipv6) }

// Leftovers are the CNI configuration, flanneld's directory, devices and iptables chains, the routes unit.
func (Plugin) Leftovers() network.Leftovers {
	return network.Leftovers{Files: []string{ConfigPath}, Dirs: []string{RunDir}, Links: []string{Link, Link6, bridge.Bridge},
		Networks: []string{Network}, Chains: []string{"FLANNEL-"}}.Add(bridge.UnitLeftovers())
}

// Check refuses a node whose interface leaves the Pods less than IPv6's minimum MTU once VXLAN's header is
// taken, or less than cni.mtu.
func (p Plugin) Check(nodes []network.Node) []preflight.Finding {
	var errs []preflight.Finding
	for _, n := range nodes {
		if n.Facts == nil {
			continue
		}
		iface := n.Facts.IfaceOf(n.IP)
		link := n.Facts.MTUs[iface]
		if iface == "" || link == 0 {
			continue // no interface holds the address: preflight says so on its own
		}
		want := link - p.overhead(n.IP)
		if want < minPodMTU {
			errs = append(errs, network.Finding(n.Host, "%s's MTU %d leaves Pods %d once VXLAN takes its %d bytes, below %d (IPv6's minimum): raise the interface's MTU",
				iface, link, want, p.overhead(n.IP), minPodMTU))
		}
		if m := p.mtu; m > want {
			errs = append(errs, network.Finding(n.Host, "cni.mtu %d is more than %s's MTU %d leaves once VXLAN takes its %d bytes (%d): Pods' large packets would be dropped",
				m, iface, link, p.overhead(n.IP), want))
		}
	}
	return errs
}

// overhead is what VXLAN takes of a node's MTU: IPv6's header on a cluster with IPv6 Pods (flanneld's
// second device tunnels them over IPv6), else that of the node address's family.
func (p Plugin) overhead(ip string) int {
	if p.ipv6 || strings.Contains(ip, ":") {
		return Overhead6
	}
	return Overhead
}

// MTU is the Pods' MTU on a node: cni.mtu, else the node interface's minus VXLAN's overhead, else what an
// interface of 1500 leaves.
func (p Plugin) MTU(n network.Node) int {
	if p.mtu > 0 {
		return p.mtu
	}
	if n.Facts != nil {
		if link := n.Facts.MTUs[n.Facts.IfaceOf(n.IP)]; link > 0 {
			return link - p.overhead(n.IP)
		}
	}
	return 1500 - p.overhead(n.IP)
}

var _ network.Staged = Plugin{}

// Objects applies flannel's objects: flanneld's DaemonSet runs on each node as it registers.
func (p Plugin) Objects(ctx context.Context, env network.Env, c *network.Cluster) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	objs, err := Objects(c.Images.Ref(ImageName), c.Inv.Cluster.Networking.PodSubnet, c.APIEndpoint)
	if err != nil {
		return err
	}
	return network.ApplyObjects(ctx, admin, env.Timeout(), "flannel's objects", objs)
}

// NodeRoutes writes a node's routes file: the Service rule (and the Service route of a host without a
// default route); flanneld makes the routes between nodes, so no other node's range is in it.
func (p Plugin) NodeRoutes(ctx context.Context, env network.Env, c *network.Cluster, n network.Node, h apply.Host) (apply.Outcome, error) {
	return p.putNode(ctx, env, c, n, h, false)
}

// NodeConfig writes a node's CNI configuration, with its range.
func (p Plugin) NodeConfig(ctx context.Context, _ *network.Cluster, n network.Node, h apply.Host) (apply.Outcome, error) {
	conf, err := p.config(n)
	if err != nil {
		return apply.Outcome{}, err
	}
	return apply.Files(ctx, h, []transport.File{{Path: ConfigPath, Data: conf, Mode: 0o644}}, false)
}

// Apply applies flannel's objects, writes the routes file (the Service rule) and the CNI configuration of
// the run's nodes, but for those the run did already (Done), and waits for flanneld to be ready on the run's
// nodes. A node outside the run keeps its files: nothing in them depends on another node (flanneld routes
// to a new node by itself).
func (p Plugin) Apply(ctx context.Context, env network.Env, c *network.Cluster) (network.Outcome, error) {
	if err := p.Objects(ctx, env, c); err != nil {
		return network.Outcome{}, err
	}
	byHost := map[string]network.Node{}
	var hosts []string
	for _, n := range c.Nodes {
		if n.InRun && !n.Done {
			byHost[n.Host] = n
			hosts = append(hosts, n.Host)
		}
	}
	err := env.OnHosts(ctx, hosts, func(ctx context.Context, host string, h apply.Host) (apply.Outcome, error) {
		n := byHost[host]
		return p.putNode(ctx, env, c, n, h, n.PodCIDR != "")
	})
	if err != nil {
		return network.Outcome{}, err
	}
	return network.Outcome{}, waitReady(ctx, env, c)
}

// putNode writes a node's routes file, and with conf its CNI configuration.
func (p Plugin) putNode(ctx context.Context, env network.Env, c *network.Cluster, n network.Node, h apply.Host, conf bool) (apply.Outcome, error) {
	services := bridge.ServiceRanges(c.Inv.Cluster.Networking.ServiceSubnet)
	nr, err := bridge.Routes(n.Name, nil, bridge.HostServiceRoutes(env, n, services), services)
	if err != nil {
		return apply.Outcome{}, err
	}
	var data []byte
	if conf {
		if data, err = p.config(n); err != nil {
			return apply.Outcome{}, err
		}
	}
	return bridge.PutRoutes(ctx, h, nr, n.IP, ConfigPath, data)
}

// config is a node's CNI configuration: the bridge plugin with its ranges.
func (p Plugin) config(n network.Node) ([]byte, error) {
	return bridge.NetworkConfig(Network, strings.Join(n.PodCIDRs, ","), p.MTU(n))
}

// waitReady waits until flanneld runs on every node of the run: its Node carries the annotations flanneld
// writes once it has its lease and its VXLAN device (the other nodes' flanneld route to it from then on),
// with the node's address. Sooner than its readiness probe says the same.
func waitReady(ctx context.Context, env network.Env, c *network.Cluster) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	return env.Poll(ctx, func() (bool, string, error) {
		list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", nil // the API server restarting: ask again
		}
		publicIP := map[string]string{}
		for i := range list.Items {
			if a := list.Items[i].Annotations; a[annotationPrefix+"backend-type"] == "vxlan" {
				publicIP[list.Items[i].Name] = a[annotationPrefix+"public-ip"]
			}
		}
		var missing []string
		for _, n := range c.Run() {
			switch ip := publicIP[n.Name]; {
			case ip == "":
				missing = append(missing, n.Name)
			case ip != n.IP:
				return false, "", fmt.Errorf("flanneld on %s tunnels from %s, not the node's address %s", n.Name, ip, n.IP)
			}
		}
		return len(missing) == 0, "flanneld on " + strings.Join(missing, ", "), nil
	})
}

// annotationPrefix is flanneld's (--kube-annotation-prefix).
const annotationPrefix = "flannel.alpha.coreos.com/"

// netConf is flanneld's net-conf.json.
type netConf struct {
	Network        string       `json:"Network,omitempty"`
	EnableIPv4     *bool        `json:"EnableIPv4,omitempty"`
	EnableIPv6     bool         `json:"EnableIPv6,omitempty"`
	IPv6Network    string       `json:"IPv6Network,omitempty"`
	EnableNFTables bool         `json:"EnableNFTables"`
	Backend        netConfVXLAN `json:"Backend"`
}

// netConfOf is net-conf.json for a pod subnet: its IPv4 range, its IPv6 range (dual-stack or IPv6 only).
func netConfOf(podSubnet string) netConf {
	c := netConf{Backend: netConfVXLAN{Type: "vxlan", Port: vxlanPort}}
	for _, r := range strings.Split(podSubnet, ",") {
		if r = strings.TrimSpace(r); strings.Contains(r, ":") {
			c.EnableIPv6, c.IPv6Network = true, r
		} else {
			c.Network = r
		}
	}
	if c.Network == "" {
		off := false
		c.EnableIPv4 = &off
	}
	return c
}

type netConfVXLAN struct {
	Type string `json:"Type"`
	Port int    `json:"Port"`
}

// Objects are flannel's: its namespace, service account and RBAC (upstream's), net-conf.json with the pod
// subnet, and the DaemonSet running image. flanneld reaches the API server at endpoint (a URL; "": the
// Service address).
func Objects(image, podSubnet, endpoint string) ([]runtime.Object, error) {
	apiEnv, err := network.APIEnv(endpoint)
	if err != nil {
		return nil, err
	}
	conf, err := json.MarshalIndent(netConfOf(podSubnet), "", "  ")
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"app": "flannel", "k8s-app": "flannel", "tier": "node"}
	meta := func(kind, apiVersion, n string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}, metav1.ObjectMeta{Name: n, Namespace: Namespace, Labels: map[string]string{"k8s-app": "flannel"}}
	}
	nsType, nsMeta := meta("Namespace", "v1", Namespace)
	nsMeta.Namespace = ""
	// warn and audit at the level it enforces: the cluster's defaults (restricted) would warn of flanneld's
	// Pods at every up
	for _, mode := range []string{"enforce", "warn", "audit"} {
		nsMeta.Labels["pod-security.kubernetes.io/"+mode] = "privileged"
	}
	saType, saMeta := meta("ServiceAccount", "v1", "flannel")
	crType, crMeta := meta("ClusterRole", "rbac.authorization.k8s.io/v1", "flannel")
	crMeta.Namespace = ""
	crbType, crbMeta := meta("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "flannel")
	crbMeta.Namespace = ""
	cmType, cmMeta := meta("ConfigMap", "v1", "kube-flannel-cfg")
	return []runtime.Object{
		&corev1.Namespace{TypeMeta: nsType, ObjectMeta: nsMeta},
		&corev1.ServiceAccount{TypeMeta: saType, ObjectMeta: saMeta},
		&rbacv1.ClusterRole{TypeMeta: crType, ObjectMeta: crMeta, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		}},
		&rbacv1.ClusterRoleBinding{TypeMeta: crbType, ObjectMeta: crbMeta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flannel"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "flannel", Namespace: Namespace}}},
		&corev1.ConfigMap{TypeMeta: cmType, ObjectMeta: cmMeta, Data: map[string]string{"net-conf.json": string(conf) + "\n"}},
		daemonSet(image, labels, apiEnv),
	}, nil
}

// daemonSet is upstream's flanneld DaemonSet without its CNI installers: flanneld on the node's address
// (the Node's InternalIP, which clusterctl sets), with the capabilities it needs and nothing more.
func daemonSet(image string, labels map[string]string, apiEnv []corev1.EnvVar) *appsv1.DaemonSet {
	f := false
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: p}}
	}
	probe := func(path string, delay, period int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("healthz")}},
			InitialDelaySeconds: delay, PeriodSeconds: period}
	}
	fileOrCreate := corev1.HostPathFileOrCreate
	hostPath := func(n, p string, t *corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: t}}}
	}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ds", Namespace: Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "flannel"}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: "flannel",
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"/opt/bin/flanneld"},
						Args: []string{"--ip-masq", "--kube-subnet-mgr", "--iface=$(NODE_IP)",
							fmt.Sprintf("--healthz-port=%d", healthPort)},
						Ports:          []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}},
						LivenessProbe:  probe("/healthz", 10, 30),
						ReadinessProbe: probe("/readyz", 1, 3),
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")}},
						SecurityContext: &corev1.SecurityContext{Privileged: &f,
							Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
						Env: append([]corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: field("metadata.name")},
							{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
							{Name: "NODE_IP", ValueFrom: field("status.hostIP")},
							{Name: "EVENT_QUEUE_DEPTH", Value: "5000"},
							{Name: "CONT_WHEN_CACHE_NOT_READY", Value: "false"},
						}, apiEnv...),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "run", MountPath: RunDir},
							{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
						},
					}},
					Volumes: []corev1.Volume{
						hostPath("run", RunDir, nil),
						{Name: "flannel-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "kube-flannel-cfg"}}}},
						hostPath("xtables-lock", "/run/xtables.lock", &fileOrCreate),
					},
				},
			},
		},
	}
}
