// Package apiclient talks to a cluster's API server with client-go, dialled through any function (the SSH
// connection of a control-plane host, so that the workstation needs no route to port 6443), and applies
// objects with server-side apply, reporting which ones changed.
package apiclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// FieldManager is clusterctl's name in managedFields.
const FieldManager = "clusterctl"

// DialFunc opens a connection to the API server.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Client is a clientset, a dynamic client and a REST mapper on one configuration.
type Client struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	Dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// New makes a client from a kubeconfig. With dial, every connection goes through it (the TLS server name
// stays the kubeconfig's host, so the API server's certificate is checked as usual).
func New(kubeconfig []byte, dial DialFunc) (*Client, error) {
	return NewForServer(kubeconfig, "", dial)
}

// NewForServer is New talking to server (https://HOST:PORT, one API server of several) instead of the
// kubeconfig's; the certificate is checked against that host.
func NewForServer(kubeconfig []byte, server string, dial DialFunc) (*Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	if server != "" {
		cfg.Host = server
	}
	if dial != nil {
		cfg.Dial = dial
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 30 * time.Second
	cfg.UserAgent = "clusterctl"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &Client{Config: cfg, Kube: kube, Dyn: dyn, mapper: mapper}, nil
}

// Applied is what applying one object did.
type Applied struct {
	Kind, Namespace, Name string
	Changed               bool
}

func (a Applied) String() string {
	if a.Namespace != "" {
		return a.Kind + " " + a.Namespace + "/" + a.Name
	}
	return a.Kind + " " + a.Name
}

// Apply server-side applies each object in order (typed objects must carry their TypeMeta). An object whose
// kind the server does not know yet (a CustomResourceDefinition applied just before) is retried for a while.
func (c *Client) Apply(ctx context.Context, objs ...runtime.Object) ([]Applied, error) {
	var out []Applied
	for _, obj := range objs {
		u, err := toUnstructured(obj)
		if err != nil {
			return out, err
		}
		a, err := c.applyOne(ctx, u)
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}

// applyConcurrency bounds ApplyAll: requests in flight at once on the client's one HTTP/2 connection.
const applyConcurrency = 8

// ApplyAll is Apply for a set of objects that needs no order among them but the one the API server has
// (clusterctl's own: bootstrap's RBAC, ConfigMaps and addons), in waves (applyWave): Namespaces and
// CustomResourceDefinitions one after another, then the objects others refer to, then the workloads (their
// Pods need the ServiceAccounts and ConfigMaps before), each wave applyConcurrency at a time. Each object
// costs two round trips (its read, its apply): on a busy lab control plane, bootstrap's 27 objects took
// 0.4-1.0 s one after another. The results are in the objects' order, up to the first object (in that
// order) whose apply failed.
func (c *Client) ApplyAll(ctx context.Context, objs ...runtime.Object) ([]Applied, error) {
	us := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		u, err := toUnstructured(obj)
		if err != nil {
			return nil, err
		}
		us[i] = u
	}
	out := make([]Applied, len(us))
	errs := make([]error, len(us))
	for wave := range 3 {
		limit := applyConcurrency
		if wave == 0 {
			limit = 1
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, limit)
		for i, u := range us {
			if applyWave(u.GroupVersionKind().GroupKind()) != wave {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				out[i], errs[i] = c.applyOne(ctx, u)
			}()
		}
		wg.Wait()
		if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
			break
		}
	}
	for i, err := range errs {
		if err != nil {
			return out[:i], err
		}
	}
	return out, nil
}

// applyWave is the wave of ApplyAll an object of kind gk goes in: 0 for what other objects live in or are
// kinds of, 2 for what starts Pods, 1 for the rest.
func applyWave(gk schema.GroupKind) int {
	switch gk {
	case schema.GroupKind{Kind: "Namespace"}, schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 0
	case schema.GroupKind{Kind: "Pod"}, schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "apps", Kind: "Deployment"},
		schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"},
		schema.GroupKind{Group: "batch", Kind: "Job"}, schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		return 2
	}
	return 1
}

// applyOne applies one object; its error names the object.
func (c *Client) applyOne(ctx context.Context, u *unstructured.Unstructured) (a Applied, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("applying %s %s: %w", u.GetKind(), qualified(u), err)
		}
	}()
	gvk := u.GroupVersionKind()
	a = Applied{Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
	var mapping *meta.RESTMapping
	for attempt := 0; ; attempt++ {
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			mapping = m
			break
		}
		if !meta.IsNoMatchError(err) || attempt >= 30 {
			return a, err
		}
		c.mapper.Reset()
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	var ri dynamic.ResourceInterface = c.Dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(metav1.NamespaceDefault)
			a.Namespace = metav1.NamespaceDefault
		}
		ri = c.Dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
	}
	before := ""
	if cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
		before = cur.GetResourceVersion()
	} else if !apierrors.IsNotFound(err) {
		return a, err
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return a, err
	}
	force := true
	after, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return a, err
	}
	a.Changed = after.GetResourceVersion() != before
	return a, nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return nil, fmt.Errorf("object %s has no apiVersion and kind", qualified(u))
	}
	// Server-side apply refuses creationTimestamp: null, which converted typed objects carry.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

func qualified(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}

// Decode reads every object of a multi-document YAML or JSON stream (List objects are flattened).
func Decode(data []byte) ([]runtime.Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []runtime.Object
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			for j := range l.Items {
				out = append(out, &l.Items[j])
			}
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", i)
		}
		out = append(out, u)
	}
}

// Ready asks the API server's /readyz, waiting at most 5 s for the answer.
func (c *Client) Ready(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
	return err
}

// Resource is the dynamic client of a resource named as the API does (secrets, deployments.apps), at
// its group's preferred version.
func (c *Client) Resource(resource string) (dynamic.NamespaceableResourceInterface, error) {
	gr := schema.ParseGroupResource(resource)
	gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", resource, err)
	}
	return c.Dyn.Resource(gvr), nil
}

// Namespaced says whether objects of a kind live in namespaces (an error when the API does not know the
// kind).
func (c *Client) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// ResourceFor is the dynamic client of objects of a kind (apiVersion and kind, as in an object), in
// namespace when the kind is namespaced.
func (c *Client) ResourceFor(apiVersion, kind, namespace string) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if err != nil {
		c.mapper.Reset()
		if m, err = c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version); err != nil {
			return nil, err
		}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dyn.Resource(m.Resource).Namespace(namespace), nil
	}
	return c.Dyn.Resource(m.Resource), nil
}
