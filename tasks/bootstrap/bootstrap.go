// Package bootstrap makes the API objects kubeadm's "upload-config", "bootstrap-token" and "mark-control-plane"
// phases create, so that nodes can join by bootstrap token and TLS bootstrap: the kubeadm-config and
// kubelet-config ConfigMaps, the bootstrap token Secret, the RBAC that lets bootstrapping kubelets ask for
// and get client certificates, the cluster-info ConfigMap in kube-public signed for the token, and the
// control-plane label and taint. Objects are typed and returned, not sent: tasks/apiclient applies them.
package bootstrap

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

// Names kubeadm gives the groups, roles and bindings; kept identical so that kubeadm's tooling and operators'
// habits work on clusters clusterctl makes.
const (
	// NodeBootstrapGroup is the extra group of the tokens `kubeadm token create` makes: with
	// cluster.kubeadmJoin the controller-manager approves any node client certificate such a token asks
	// for (kubeadm's node-autoapprove-bootstrap binding, AutoApproveBinding).
	NodeBootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"
	// JoinGroup is the extra group of the tokens clusterctl makes, one per joining host: it may ask for
	// certificates and nothing else. No binding lets the controller-manager approve what it asks for:
	// clusterctl approves one client certificate per token, for that token's host (csr.CheckClient).
	JoinGroup = "system:bootstrappers:clusterctl"
	// ClusterAdminsGroup is admin.conf's group, bound to cluster-admin (kubeadm ≥ 1.29; super-admin.conf
	// keeps system:masters for break-glass use).
	ClusterAdminsGroup = "kubeadm:cluster-admins"
	NodesGroup         = "system:nodes"

	// ControlPlaneLabel and ControlPlaneTaint mark control-plane nodes (the "master" label and taint are
	// gone upstream since 1.25).
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// ExcludeFromLBLabel keeps control-plane nodes out of Service load balancers, as kubeadm does.
	ExcludeFromLBLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

	KubeSystem = metav1.NamespaceSystem
	KubePublic = metav1.NamespacePublic
)

// Token is a bootstrap token, <id>.<secret> as kubeadm makes them, issued to one joining host.
type Token struct {
	ID      string
	Secret  string
	Expires time.Time
	// Host is the inventory host the token was issued to: the only one it may join as.
	Host string
}

// NewToken makes a random token for a host that expires after ttl.
func NewToken(host string, now time.Time, ttl time.Duration) (Token, error) {
	s, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return Token{}, err
	}
	id, secret, _ := strings.Cut(s, ".")
	return Token{ID: id, Secret: secret, Expires: now.Add(ttl).UTC().Truncate(time.Second), Host: host}, nil
}

// tokenJSON is a token as the state directory keeps it.
type tokenJSON struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// MarshalTokens are tokens by host, for the state directory (a file of mode 0600).
func MarshalTokens(tokens map[string]Token) ([]byte, error) {
	out := map[string]tokenJSON{}
	for host, t := range tokens {
		out[host] = tokenJSON{Token: t.String(), Expires: t.Expires}
	}
	data, err := json.MarshalIndent(out, "", "  ")
	return append(data, '\n'), err
}

// ParseTokens reads what MarshalTokens wrote; a token that is not a bootstrap token is an error.
func ParseTokens(data []byte) (map[string]Token, error) {
	var in map[string]tokenJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, err
	}
	out := map[string]Token{}
	for host, t := range in {
		if !bootstraputil.IsValidBootstrapToken(t.Token) {
			return nil, fmt.Errorf("host %s: not a bootstrap token", host)
		}
		id, secret, _ := strings.Cut(t.Token, ".")
		out[host] = Token{ID: id, Secret: secret, Expires: t.Expires, Host: host}
	}
	return out, nil
}

// String is the token as kubelets present it.
func (t Token) String() string { return t.ID + "." + t.Secret }

// Username is who the API server authenticates the token as.
func (t Token) Username() string { return bootstrapapi.BootstrapUserPrefix + t.ID }

// SecretName is the token's Secret in kube-system.
func (t Token) SecretName() string { return bootstraputil.BootstrapTokenSecretName(t.ID) }

// Object is the token's Secret: authentication for its host's kubelet, in JoinGroup; no signing of
// cluster-info (kubeadm join's discovery; clusterctl's kubelets get the CA with the token).
func (t Token) Object() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: t.SecretName(), Namespace: KubeSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               t.ID,
			bootstrapapi.BootstrapTokenSecretKey:           t.Secret,
			bootstrapapi.BootstrapTokenExpirationKey:       t.Expires.Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenExtraGroupsKey:      JoinGroup,
			bootstrapapi.BootstrapTokenDescriptionKey:      "made by clusterctl for host " + t.Host + " to join; deleted once its Node is registered",
		},
	}
}

// ClusterInfoKubeconfig is the kubeconfig published in cluster-info: the API endpoint and the CA, nothing
// else.
func ClusterInfoKubeconfig(endpoint string, caPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: endpoint, CertificateAuthorityData: caPEM}
	return runtime.Encode(clientcmdlatest.Codec, cfg)
}

// ClusterInfo is kube-public/cluster-info with the kubeconfig and its detached JWS signature for each token
// given (the bootstrap signer controller keeps these up to date too; writing them here makes them
// available at once).
func ClusterInfo(kubeconfig []byte, tokens ...Token) (*corev1.ConfigMap, error) {
	cm := configMap(KubePublic, bootstrapapi.ConfigMapClusterInfo, map[string]string{bootstrapapi.KubeConfigKey: string(kubeconfig)})
	for _, t := range tokens {
		sig, err := jws.ComputeDetachedSignature(string(kubeconfig), t.ID, t.Secret)
		if err != nil {
			return nil, err
		}
		cm.Data[bootstrapapi.JWSSignatureKeyPrefix+t.ID] = sig
	}
	return cm, nil
}

// ClusterConfig is what kubeadm-config holds: kubeadm's ClusterConfiguration (v1beta4), without secrets.
type ClusterConfig struct {
	KubernetesVersion    string
	ClusterName          string
	ControlPlaneEndpoint string
	PodSubnet            string
	ServiceSubnet        string
	DNSDomain            string
	ImageRepository      string
	EncryptionAlgorithm  string
	CertValidity         time.Duration
	CAValidity           time.Duration
	APIServerArgs        [][2]string
	ControllerManager    [][2]string
	SchedulerArgs        [][2]string
	EtcdArgs             [][2]string
	CertSANs             []string
	// APIServerVolumes are the API server's extraVolumes.
	APIServerVolumes []Volume
	// EtcdServers are the client URLs of an external etcd cluster; empty: stacked etcd (etcd.local).
	EtcdServers []string
}

// Volume is one of a component's extraVolumes, as kubeadm's ClusterConfiguration writes it.
type Volume struct {
	Name      string `json:"name"`
	HostPath  string `json:"hostPath"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	PathType  string `json:"pathType,omitempty"`
}

// KubeadmConfig is kube-system/kubeadm-config, so that `kubeadm upgrade` and tools that read it find the
// cluster's settings.
func KubeadmConfig(c ClusterConfig) (*corev1.ConfigMap, error) {
	args := func(pairs [][2]string) []map[string]string {
		out := []map[string]string{}
		for _, p := range pairs {
			out = append(out, map[string]string{"name": p[0], "value": p[1]})
		}
		return out
	}
	doc := map[string]any{
		"apiVersion":                  "kubeadm.k8s.io/v1beta4",
		"kind":                        "ClusterConfiguration",
		"kubernetesVersion":           c.KubernetesVersion,
		"clusterName":                 c.ClusterName,
		"controlPlaneEndpoint":        c.ControlPlaneEndpoint,
		"certificatesDir":             kubeadm.PKIDir,
		"imageRepository":             c.ImageRepository,
		"encryptionAlgorithm":         c.EncryptionAlgorithm,
		"certificateValidityPeriod":   metav1.Duration{Duration: c.CertValidity},
		"caCertificateValidityPeriod": metav1.Duration{Duration: c.CAValidity},
		"networking":                  map[string]string{"podSubnet": c.PodSubnet, "serviceSubnet": c.ServiceSubnet, "dnsDomain": c.DNSDomain},
		"apiServer":                   map[string]any{"extraArgs": args(c.APIServerArgs), "certSANs": c.CertSANs, "extraVolumes": volumes(c.APIServerVolumes)},
		"controllerManager":           map[string]any{"extraArgs": args(c.ControllerManager)},
		"scheduler":                   map[string]any{"extraArgs": args(c.SchedulerArgs)},
		"etcd":                        map[string]any{"local": map[string]any{"dataDir": kubeadm.EtcdDataDir, "extraArgs": args(c.EtcdArgs)}},
		"dns":                         map[string]any{},
		"proxy":                       map[string]any{},
	}
	if len(c.EtcdServers) > 0 {
		// The API servers' client of the etcd hosts: kubeadm then neither checks nor renews etcd's own
		// certificates, which live on those hosts.
		doc["etcd"] = map[string]any{"external": map[string]any{"endpoints": c.EtcdServers,
			"caFile": path.Join(kubeadm.PKIDir, "etcd/ca.crt"), "certFile": path.Join(kubeadm.PKIDir, "apiserver-etcd-client.crt"),
			"keyFile": path.Join(kubeadm.PKIDir, "apiserver-etcd-client.key")}}
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return configMap(KubeSystem, "kubeadm-config", map[string]string{"ClusterConfiguration": string(data)}), nil
}

func volumes(v []Volume) []Volume {
	if v == nil {
		return []Volume{}
	}
	return v
}

// KubeletConfig is kube-system/kubelet-config: the KubeletConfiguration every node runs with.
func KubeletConfig(config []byte) *corev1.ConfigMap {
	return SignComponentConfig(configMap(KubeSystem, "kubelet-config", map[string]string{"kubelet": string(config)}))
}

// ComponentConfigHash is the annotation kubeadm marks the component configurations it made with (kubelet-
// config, kube-proxy's ConfigMap): with it kubeadm treats the configuration as generated, not the user's.
const ComponentConfigHash = "kubeadm.kubernetes.io/component-config.hash"

// SignComponentConfig annotates a component's ConfigMap as kubeadm does (ChecksumForConfigMap): the SHA-256
// of its values in the order of their keys, data then binaryData. It returns cm.
func SignComponentConfig(cm *corev1.ConfigMap) *corev1.ConfigMap {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		h.Write([]byte(cm.Data[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		h.Write(cm.BinaryData[k])
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[ComponentConfigHash] = fmt.Sprintf("sha256:%x", h.Sum(nil))
	return cm
}

// AutoApproveBinding is kubeadm's binding that lets the controller-manager approve the client certificate
// of any node name a `kubeadm token create` token asks for: bound only with cluster.kubeadmJoin.
const AutoApproveBinding = "kubeadm:node-autoapprove-bootstrap"

// Objects are the RBAC objects and ConfigMaps of a new cluster, in the order to apply them: the admin
// binding first (everything after may be applied with admin.conf), then what joining nodes need. With
// kubeadmJoin, kubeadm's auto-approval of its tokens' node client certificates too (AutoApproveBinding).
func Objects(kubeadmJoin bool, kubeadmConfig, kubeletConfig, clusterInfo *corev1.ConfigMap) []runtime.Object {
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	objs := []runtime.Object{
		// admin.conf's group is cluster-admin.
		ClusterRoleBinding("kubeadm:cluster-admins", "cluster-admin", group(ClusterAdminsGroup)),
		// Joining kubelets with kubeadm's tokens may create CSRs (approved by a person, or with
		// kubeadmJoin by the controller-manager), and nodes may renew their own client certificates.
		ClusterRoleBinding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", group(NodeBootstrapGroup)),
		ClusterRoleBinding("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group(NodesGroup)),
		// clusterctl's join tokens may ask for certificates, nothing more: clusterctl approves them.
		ClusterRoleBinding("clusterctl:kubelet-bootstrap", "system:node-bootstrapper", group(JoinGroup)),
		// Joining nodes read their Node (kubeadm join checks for a name clash).
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
		},
		ClusterRoleBinding("kubeadm:get-nodes", "kubeadm:get-nodes", group(NodeBootstrapGroup)),
		kubeadmConfig, kubeletConfig,
		// Nodes and bootstrapping nodes read the cluster's configuration.
		GetRole(KubeSystem, "kubeadm:nodes-kubeadm-config", "configmaps", "kubeadm-config"),
		RoleBinding(KubeSystem, "kubeadm:nodes-kubeadm-config", group(NodeBootstrapGroup), group(NodesGroup)),
		GetRole(KubeSystem, "kubeadm:kubelet-config", "configmaps", "kubelet-config"),
		RoleBinding(KubeSystem, "kubeadm:kubelet-config", group(NodeBootstrapGroup), group(NodesGroup)),
		// cluster-info is the one thing anonymous clients may read: joiners verify it with the token's JWS.
		clusterInfo,
		GetRole(KubePublic, "kubeadm:bootstrap-signer-clusterinfo", "configmaps", bootstrapapi.ConfigMapClusterInfo),
		RoleBinding(KubePublic, "kubeadm:bootstrap-signer-clusterinfo", user("system:anonymous")),
	}
	if kubeadmJoin {
		objs = append(objs, ClusterRoleBinding(AutoApproveBinding, "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group(NodeBootstrapGroup)))
	}
	return objs
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       data,
	}
}

// ClusterRoleBinding binds a ClusterRole to subjects.
func ClusterRoleBinding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

// GetRole lets its subjects get one named object.
func GetRole(ns, name, resource, object string) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, ResourceNames: []string{object}, Verbs: []string{"get"}}},
	}
}

// RoleBinding binds the Role of the same name to subjects.
func RoleBinding(ns, name string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subjects,
	}
}

// BootstrapKubeconfig is /etc/kubernetes/bootstrap-kubelet.conf for a joining node: the CA pinned (its
// certificate itself, not only its hash) and the token as credential.
func BootstrapKubeconfig(cluster, endpoint string, caPEM []byte, t Token) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: endpoint, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["tls-bootstrap-token-user"] = &clientcmdapi.AuthInfo{Token: t.String()}
	ctx := "tls-bootstrap-token-user@" + cluster
	cfg.Contexts[ctx] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: "tls-bootstrap-token-user"}
	cfg.CurrentContext = ctx
	return runtime.Encode(clientcmdlatest.Codec, cfg)
}
