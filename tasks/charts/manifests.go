package charts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/textdiff"
)

// ManifestSet is a manifests add-on's objects, as read (or built by kustomize), and their digest.
type ManifestSet struct {
	Objects []*unstructured.Unstructured
	YAML    string
	Digest  string
}

// kustomizations are the names kustomize looks for in a directory.
var kustomizations = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// LoadManifests reads a manifests add-on: a YAML file, every .yaml, .yml and .json file of a directory in
// name order, or what kustomize builds from a directory with a kustomization (no plugins, no files from
// outside the directory, no remote bases).
func LoadManifests(a *inventory.Addon, resolve func(string) string) (*ManifestSet, error) {
	p := resolve(a.Manifests)
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("add-on %s: manifests: %w", a.Name, err)
	}
	var docs []byte
	switch {
	case !st.IsDir():
		if docs, err = readBounded(p); err != nil {
			return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
		}
	case hasKustomization(p):
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		res, err := k.Run(filesys.MakeFsOnDisk(), p)
		if err != nil {
			return nil, fmt.Errorf("add-on %s: kustomize build %s: %w", a.Name, p, err)
		}
		if docs, err = res.AsYaml(); err != nil {
			return nil, fmt.Errorf("add-on %s: kustomize build %s: %w", a.Name, p, err)
		}
	default:
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
		}
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if !e.Type().IsRegular() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
				continue
			}
			data, err := readBounded(filepath.Join(p, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
			}
			docs = append(append(docs, "\n---\n"...), data...)
		}
	}
	objs, err := apiclient.Decode(docs)
	if err != nil {
		return nil, fmt.Errorf("add-on %s: manifests %s: %w", a.Name, a.Manifests, err)
	}
	set := &ManifestSet{YAML: string(docs)}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[AddonLabel] = a.Name
		u.SetLabels(l)
		set.Objects = append(set.Objects, u)
	}
	if len(set.Objects) == 0 {
		return nil, fmt.Errorf("add-on %s: manifests %s hold no object", a.Name, a.Manifests)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", a.NamespaceOrDefault(), a.PodSecurity)
	for _, u := range set.Objects {
		data, _ := u.MarshalJSON()
		h.Write(data)
	}
	set.Digest = hex.EncodeToString(h.Sum(nil))
	return set, nil
}

func hasKustomization(dir string) bool {
	for _, n := range kustomizations {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// record is what clusterctl keeps of a manifests add-on it applied: a ConfigMap in kube-system, marked,
// naming every object (so that objects dropped from the files, or the whole add-on, are deleted).
type record struct {
	Name, Namespace string
	Revision        int
	Digest          string
	Applied         time.Time
	Objects         []objectRef
}

type objectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (o objectRef) String() string {
	if o.Namespace != "" {
		return o.Kind + " " + o.Namespace + "/" + o.Name
	}
	return o.Kind + " " + o.Name
}

const recordPrefix = "clusterctl-addon-"

func (c *Client) records(ctx context.Context) ([]record, error) {
	l, err := c.api.Kube.CoreV1().ConfigMaps(bootstrap.KubeSystem).List(ctx, metav1.ListOptions{LabelSelector: ManagedLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("listing clusterctl's manifests add-ons: %w", err)
	}
	var out []record
	for _, cm := range l.Items {
		if !strings.HasPrefix(cm.Name, recordPrefix) {
			continue
		}
		r := record{Name: strings.TrimPrefix(cm.Name, recordPrefix), Namespace: cm.Data["namespace"], Digest: cm.Data["sha256"]}
		r.Revision, _ = strconv.Atoi(cm.Data["revision"])
		r.Applied, _ = time.Parse(time.RFC3339, cm.Data["applied"])
		if err := json.Unmarshal([]byte(cm.Data["objects"]), &r.Objects); err != nil {
			return nil, fmt.Errorf("ConfigMap kube-system/%s: objects: %w", cm.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func refsOf(set *ManifestSet) []objectRef {
	var out []objectRef
	for _, u := range set.Objects {
		out = append(out, objectRef{u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()})
	}
	return out
}

func (c *Client) planManifests(d *Desired, records []record) Change {
	a := d.Addon
	ch := Change{Name: a.Name, Namespace: a.NamespaceOrDefault(), Chart: "manifests"}
	var rec *record
	for i := range records {
		if records[i].Name == a.Name {
			rec = &records[i]
		}
	}
	newRefs := d.Set.namespaced(a.NamespaceOrDefault(), c.api)
	if rec == nil {
		ch.Action = Install
		ch.Diff = refsDiff(nil, newRefs)
		return ch
	}
	ch.Revision = rec.Revision
	if rec.Digest == d.Set.Digest {
		ch.Action = Unchanged
		return ch
	}
	ch.Action = Upgrade
	ch.Reasons = []string{"the manifests changed"}
	ch.Diff = refsDiff(rec.Objects, newRefs)
	return ch
}

// namespaced gives namespaced objects that name no namespace the add-on's (the API's mapping says
// which kinds are namespaced; a kind it does not know yet, a custom resource of a definition in the same
// set, is taken as namespaced when the definition says so, else left as written).
func (s *ManifestSet) namespaced(ns string, api *apiclient.Client) []objectRef {
	for _, u := range s.Objects {
		if u.GetNamespace() != "" {
			continue
		}
		if namespaced, err := api.Namespaced(u.GroupVersionKind()); err == nil && namespaced {
			u.SetNamespace(ns)
		}
	}
	return refsOf(s)
}

func refsDiff(old, new []objectRef) string {
	lines := func(refs []objectRef) string {
		var b strings.Builder
		for _, r := range refs {
			b.WriteString(r.String() + "\n")
		}
		return b.String()
	}
	return textdiff.Unified("applied objects", "inventory objects", lines(old), lines(new), 3)
}

func (c *Client) applyManifests(ctx context.Context, ch Change, say Progress) error {
	a, set := ch.desired.Addon, ch.desired.Set
	start := time.Now()
	if err := c.ensureNamespace(ctx, ch.Namespace, a.PodSecurity); err != nil {
		return fmt.Errorf("add-on %s: namespace %s: %w", a.Name, ch.Namespace, err)
	}
	objs := make([]runtime.Object, len(set.Objects))
	for i, u := range set.Objects {
		objs[i] = u
	}
	applied, err := c.api.Apply(ctx, objs...)
	if err != nil {
		return fmt.Errorf("add-on %s: %w", a.Name, err)
	}
	changed := 0
	for _, ap := range applied {
		if ap.Changed {
			changed++
		}
	}
	// objects the files no longer have
	recs, err := c.records(ctx)
	if err != nil {
		return err
	}
	newRefs := refsOf(set)
	for _, rec := range recs {
		if rec.Name != a.Name {
			continue
		}
		for _, o := range slices.Backward(rec.Objects) {
			if !slices.Contains(newRefs, o) {
				if err := c.deleteObject(ctx, o); err != nil {
					return fmt.Errorf("add-on %s: deleting %s (no longer in its manifests): %w", a.Name, o, err)
				}
				say(a.Name, "deleted %s (no longer in its manifests)", o)
			}
		}
	}
	if a.Waits() {
		if err := c.waitObjects(ctx, set, a.TimeoutOrDefault()); err != nil {
			return fmt.Errorf("add-on %s: %w", a.Name, err)
		}
	}
	if err := c.writeRecord(ctx, a, ch.Revision+1, set); err != nil {
		return fmt.Errorf("add-on %s: %w", a.Name, err)
	}
	say(a.Name, "applied %d objects (%d changed) in %s (revision %d) in %s", len(applied), changed, ch.Namespace, ch.Revision+1, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (c *Client) writeRecord(ctx context.Context, a *inventory.Addon, revision int, set *ManifestSet) error {
	objs, err := json.Marshal(refsOf(set))
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: recordPrefix + a.Name, Namespace: bootstrap.KubeSystem, Labels: map[string]string{ManagedLabel: "true"}},
		Data: map[string]string{"namespace": a.NamespaceOrDefault(), "sha256": set.Digest, "revision": strconv.Itoa(revision),
			"applied": time.Now().UTC().Format(time.RFC3339), "objects": string(objs)},
	}
	_, err = c.api.Apply(ctx, cm)
	return err
}

func (c *Client) uninstallManifests(ctx context.Context, name string, say Progress) error {
	recs, err := c.records(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Name != name {
			continue
		}
		for _, o := range slices.Backward(rec.Objects) {
			if err := c.deleteObject(ctx, o); err != nil {
				return fmt.Errorf("uninstalling add-on %s: deleting %s: %w", name, o, err)
			}
		}
		err := c.api.Kube.CoreV1().ConfigMaps(bootstrap.KubeSystem).Delete(ctx, recordPrefix+name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		say(name, "uninstalled (manifests: %d objects deleted)", len(rec.Objects))
	}
	return nil
}

// deleteObject deletes one object clusterctl applied (one already gone, or whose kind is gone, is done).
func (c *Client) deleteObject(ctx context.Context, o objectRef) error {
	ri, err := c.api.ResourceFor(o.APIVersion, o.Kind, o.Namespace)
	if err != nil {
		if strings.Contains(err.Error(), "no matches for kind") {
			return nil // its definition is gone, and it with it
		}
		return err
	}
	policy := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ensureNamespace creates the add-on's namespace when missing and labels it with its Pod Security level.
func (c *Client) ensureNamespace(ctx context.Context, name, podSecurity string) error {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podSecurity != "" {
		// warn and audit at the same level: the cluster's defaults (restricted, with the cis profile)
		// would warn of every Pod the level lets in
		ns.Labels = map[string]string{}
		for _, mode := range []string{"enforce", "warn", "audit"} {
			ns.Labels["pod-security.kubernetes.io/"+mode] = podSecurity
			ns.Labels["pod-security.kubernetes.io/"+mode+"-version"] = "latest"
		}
	} else {
		// created only: a namespace that exists (default, kube-system) is not taken over
		_, err := c.api.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	_, err := c.api.Apply(ctx, ns)
	return err
}

// YAMLOf writes objects as a YAML stream (for a dry run's output).
func YAMLOf(objs []*unstructured.Unstructured) string {
	var b strings.Builder
	for _, u := range objs {
		data, err := sigsyaml.Marshal(u.Object)
		if err != nil {
			continue
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.String()
}
