package charts

import (
	"io"
	"log/slog"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"

	"github.com/clusterctl/clusterctl/tasks/apiclient"
)

// Labels clusterctl puts on what it installs: a Helm release's (its storage Secret's) and a manifests
// add-on's record and objects. A release without ManagedLabel is someone else's: never upgraded, taken
// over or uninstalled.
const (
	ManagedLabel = "clusterctl.dev/managed"
	// DigestLabel is the release's chart digest (its first 32 hex digits): a chart changed at the same
	// version (a path chart edited) is upgraded.
	DigestLabel = "clusterctl.dev/chart-sha256"
	// AddonLabel names the manifests add-on an object belongs to.
	AddonLabel = "clusterctl.dev/addon"
)

// Client installs add-ons through one API client (its connection: the SSH tunnel).
type Client struct {
	api *apiclient.Client
	// disc is discovery cached for the run (Helm asks for the API's versions on every action).
	disc discovery.CachedDiscoveryInterface
	// Log receives Helm's own log (debug lines); nil discards it.
	Log slog.Handler

	mu sync.Mutex
	// warnings are the API server's warnings (deprecated APIs, Pod Security's) not yet said.
	warnings []string
}

// HandleWarningHeader keeps a warning of the API server's for the add-on being applied (rest.WarningHandler).
func (c *Client) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.warnings, text) {
		c.warnings = append(c.warnings, text)
	}
}

// takeWarnings returns the warnings kept since the last call.
func (c *Client) takeWarnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.warnings
	c.warnings = nil
	return w
}

// NewClient makes a Client on api's configuration.
func NewClient(api *apiclient.Client) *Client {
	return &Client{api: api, disc: memory.NewMemCacheClient(api.Kube.Discovery())}
}

// getter gives Helm the run's REST configuration (with its dialler) in place of a kubeconfig file.
type getter struct {
	c         *Client
	namespace string
}

// ToRESTConfig is the run's configuration, the API server's warnings going to the add-on's progress.
func (g getter) ToRESTConfig() (*rest.Config, error) {
	cfg := rest.CopyConfig(g.c.api.Config)
	cfg.WarningHandler = g.c
	return cfg, nil
}

func (g getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) { return g.c.disc, nil }

func (g getter) ToRESTMapper() (meta.RESTMapper, error) {
	m := restmapper.NewDeferredDiscoveryRESTMapper(g.c.disc)
	return restmapper.NewShortcutExpander(m, g.c.disc, nil), nil
}

func (g getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	cfg := clientcmdapi.NewConfig()
	cfg.Contexts["clusterctl"] = &clientcmdapi.Context{Namespace: g.namespace}
	cfg.CurrentContext = "clusterctl"
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
}

// action is Helm's configuration for releases in namespace ("" for every namespace), stored as Secrets
// (Helm's default driver: what helm list shows).
func (c *Client) action(namespace string) (*action.Configuration, error) {
	h := c.Log
	if h == nil {
		h = slog.NewTextHandler(io.Discard, nil)
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(h))
	if err := cfg.Init(getter{c, namespace}, namespace, "secret"); err != nil {
		return nil, err
	}
	return cfg, nil
}

// kube is Helm's Kubernetes client (builds resource lists from YAML, waits for them).
func (c *Client) kube(namespace string) *kube.Client {
	kc := kube.New(getter{c, namespace})
	kc.Namespace = namespace
	return kc
}
