package inventory

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Addon is one add-on installed once the cluster is up, in the order of cluster.addons: a Helm chart (from
// a repository, an OCI registry or a path beside the inventory) or a set of manifests applied with
// server-side apply. clusterctl installs what is missing, upgrades what changed, leaves the rest alone and
// uninstalls the add-ons taken out of the list (only those it installed).
type Addon struct {
	// Name is the Helm release's name (a manifests add-on's name in clusterctl's record): lower-case
	// letters, digits, '-' and '.', at most 53 characters, unique.
	Name string `yaml:"name" json:"name"`
	// Chart is the chart's name in Repository.
	Chart string `yaml:"chart,omitempty" json:"chart,omitempty"`
	// Version is the chart's exact version (a repository's newest changes; the lock pins the one pulled);
	// with path, the version the chart must have.
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	// Repository is an https:// Helm repository (its index.yaml) or an oci:// registry path that holds
	// the chart as <repository>/<chart>:<version>.
	Repository string `yaml:"repository,omitempty" json:"repository,omitempty"`
	// Path is a chart directory or packaged chart (.tgz), relative to the inventory's directory.
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// Manifests is a YAML file, a directory of them, or a directory with a kustomization.yaml, relative to
	// the inventory's directory, applied with server-side apply.
	Manifests string `yaml:"manifests,omitempty" json:"manifests,omitempty"`
	// Namespace is where the release (a manifests add-on: its namespaced objects that name none) goes;
	// created when missing. Default: the add-on's name for a chart, default for manifests.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// PodSecurity labels the namespace with this Pod Security level (privileged, baseline, restricted),
	// for an add-on that needs more than the cluster's default (a storage or network driver).
	PodSecurity string `yaml:"podSecurity,omitempty" json:"podSecurity,omitempty"`
	// Values are the chart's values, over those of ValuesFiles (as helm's --set over --values).
	Values Values `yaml:"values,omitempty" json:"values,omitempty"`
	// ValuesFiles are YAML files of values (relative to the inventory's directory), each over the one
	// before, over the chart's defaults.
	ValuesFiles []string `yaml:"valuesFiles,omitempty" json:"valuesFiles,omitempty"`
	// Wait for the add-on's workloads to be ready before the next one (default true).
	Wait *bool `yaml:"wait,omitempty" json:"wait,omitempty"`
	// Timeout bounds the install and the wait (default 5m).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitzero"`
	// Network marks the pod network, installed with cni.plugin: none in the network step, before anything
	// waits for Nodes to be Ready.
	Network bool `yaml:"network,omitempty" json:"network,omitempty"`
	// Images are images the add-on runs that its manifests do not name (Pods an operator creates): pulled
	// into the artifacts and imported on every node with those the manifests name.
	Images []string `yaml:"images,omitempty" json:"images,omitempty"`
}

// Values are a chart's values as written in the inventory: any mapping.
type Values map[string]any

// DefaultAddonTimeout bounds the wait for an add-on's workloads.
const DefaultAddonTimeout = 5 * time.Minute

// Kinds of add-on source.
const (
	AddonRepository = "repository" // a chart from an https:// repository
	AddonOCI        = "oci"        // a chart from an OCI registry
	AddonPath       = "path"       // a chart directory or .tgz beside the inventory
	AddonManifests  = "manifests"  // YAML applied with server-side apply
)

// Source is where the add-on comes from: AddonRepository, AddonOCI, AddonPath or AddonManifests.
func (a *Addon) Source() string {
	switch {
	case a.Manifests != "":
		return AddonManifests
	case a.Path != "":
		return AddonPath
	case strings.HasPrefix(a.Repository, "oci://"):
		return AddonOCI
	}
	return AddonRepository
}

// IsChart: the add-on is a Helm chart (from anywhere).
func (a *Addon) IsChart() bool { return a.Source() != AddonManifests }

// Waits says whether the add-on's workloads are waited for.
func (a *Addon) Waits() bool { return a.Wait == nil || *a.Wait }

// TimeoutOrDefault is how long the wait may take.
func (a *Addon) TimeoutOrDefault() time.Duration {
	if a.Timeout.Duration > 0 {
		return a.Timeout.Duration
	}
	return DefaultAddonTimeout
}

// NamespaceOrDefault is the release's namespace.
func (a *Addon) NamespaceOrDefault() string {
	switch {
	case a.Namespace != "":
		return a.Namespace
	case a.IsChart():
		return a.Name
	}
	return "default"
}

// OCIRef is an OCI chart's reference without the scheme: registry/path/chart:version.
func (a *Addon) OCIRef() string {
	return strings.TrimSuffix(strings.TrimPrefix(a.Repository, "oci://"), "/") + "/" + a.Chart + ":" + a.Version
}

// NetworkAddons are the add-ons that make the pod network.
func (c *Cluster) NetworkAddons() []Addon {
	var out []Addon
	for _, a := range c.Addons {
		if a.Network {
			out = append(out, a)
		}
	}
	return out
}

var (
	// releaseRE is Helm's rule for a release name (a DNS subdomain of at most 53 characters).
	releaseRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// chartNameRE is a chart's name in a repository.
	chartNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$`)
	// semverRE is an exact chart version (SemVer 2, an optional leading v).
	semverRE = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	// namespaceRE is a DNS label.
	namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// repositoryURLRE is an https:// (or http://, with downloads.allowHTTP) or oci:// address: a host,
	// an optional port and path, no credentials, query or fragment.
	repositoryURLRE = regexp.MustCompile(`^(https?|oci)://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%-]+)*/?$`)
)

// maxValues bounds an add-on's inline values (they travel into a Secret of at most 1 MiB).
const maxValues = 512 << 10

// addons checks cluster.addons: each a chart or manifests, with what its source needs and nothing it does
// not take.
func (v *validator) addons(c *Cluster) {
	seen := map[string]int{}
	networks := 0
	for i := range c.Addons {
		a := &c.Addons[i]
		k := fmt.Sprintf("cluster.addons[%d]", i)
		switch {
		case a.Name == "":
			v.errorf(k+".name", "an add-on needs a name (its Helm release's)")
		case len(a.Name) > 53 || !releaseRE.MatchString(a.Name):
			v.errorf(k+".name", "%q is not a release name: at most 53 characters; %s", a.Name, dnsRule)
		default:
			if j, dup := seen[a.Name]; dup {
				v.errorf(k+".name", "%q is also the name of cluster.addons[%d]: names are releases, one each", a.Name, j)
			}
			seen[a.Name] = i
		}
		v.addonSource(k, a, c)
		if a.Namespace != "" && (len(a.Namespace) > 63 || !namespaceRE.MatchString(a.Namespace)) {
			v.errorf(k+".namespace", "%q is not a namespace name: at most 63 characters; lower-case letters, digits and '-', starting and ending with a letter or digit", a.Namespace)
		}
		if a.PodSecurity != "" && !slices.Contains(PodSecurityLevels, a.PodSecurity) {
			v.errorf(k+".podSecurity", "%q is not a Pod Security level: use %s", a.PodSecurity, strings.Join(PodSecurityLevels, ", "))
		}
		if t := a.Timeout.Duration; t != 0 && (t < time.Second || t > 24*time.Hour) {
			v.errorf(k+".timeout", "%s: from 1s to 24h", t)
		}
		for j, ref := range a.Images {
			if !isImageRef(ref) {
				v.errorf(fmt.Sprintf("%s.images[%d]", k, j), "%q is not an image reference with a registry and a tag (example: quay.io/cilium/operator:v1.20.2)", ref)
			}
		}
		if a.Network {
			networks++
			switch {
			case c.CNI.Plugin != CNINone:
				v.errorf(k+".network", "a pod network add-on replaces clusterctl's: set cluster.cni.plugin: none (it is %s)", c.CNI.Plugin)
			case networks > 1:
				v.errorf(k+".network", "only one add-on can be the pod network")
			}
		}
	}
}

// addonSource checks that the add-on names exactly one source and what that source needs.
func (v *validator) addonSource(k string, a *Addon, c *Cluster) {
	var sources []string
	for _, s := range []struct{ field, value string }{{"chart", a.Chart}, {"path", a.Path}, {"manifests", a.Manifests}} {
		if s.value != "" {
			sources = append(sources, s.field)
		}
	}
	if len(sources) != 1 {
		msg := "an add-on is one of: chart (with version and repository), path (a chart directory or .tgz) or manifests (YAML, a directory of it, or a kustomization)"
		if len(sources) > 1 {
			msg = fmt.Sprintf("%s and %s both given: %s", sources[0], sources[1], msg)
		}
		v.errorf(k+"."+lastOr(sources, "chart"), "%s", msg)
		return
	}
	switch sources[0] {
	case "chart":
		if !chartNameRE.MatchString(a.Chart) || len(a.Chart) > 250 {
			v.errorf(k+".chart", "%q is not a chart name (lower-case letters, digits, '-', '_' and '.'; the repository goes in repository)", a.Chart)
		}
		switch {
		case a.Version == "":
			v.errorf(k+".version", "a chart from a repository needs its exact version (for example 3.13.0): a repository's newest changes under you")
		case !semverRE.MatchString(a.Version):
			v.errorf(k+".version", "%q is not an exact chart version (SemVer, as 3.13.0; no ranges)", a.Version)
		}
		switch {
		case a.Repository == "":
			v.errorf(k+".repository", "a chart needs its repository: an https:// Helm repository or an oci:// registry path")
		case !repositoryURLRE.MatchString(a.Repository) || len(a.Repository) > 2048:
			v.errorf(k+".repository", "%q is not an https:// Helm repository or an oci:// registry path (no credentials, query or fragment)", a.Repository)
		case strings.HasPrefix(a.Repository, "http://") && !c.Downloads.AllowHTTP && !loopbackURL(a.Repository):
			v.errorf(k+".repository", "%q is plain HTTP: charts are fetched over HTTPS (or from loopback) unless cluster.downloads.allowHTTP is true", a.Repository)
		}
	case "path":
		v.noRepository(k, a, "path")
		if a.Version != "" && !semverRE.MatchString(a.Version) {
			v.errorf(k+".version", "%q is not an exact chart version (SemVer, as 3.13.0)", a.Version)
		}
		v.existing(k+".path", a.Path)
	case "manifests":
		v.noRepository(k, a, "manifests")
		if a.Version != "" {
			v.errorf(k+".version", "manifests have no version: the files are the add-on")
		}
		if len(a.Values) > 0 || len(a.ValuesFiles) > 0 {
			v.errorf(k+".values", "values are a chart's: manifests are applied as written")
		}
		v.existing(k+".manifests", a.Manifests)
	}
	for j, f := range a.ValuesFiles {
		v.existing(fmt.Sprintf("%s.valuesFiles[%d]", k, j), f)
	}
	if len(a.Values) > 0 {
		if out, err := yaml.Marshal(map[string]any(a.Values)); err != nil || len(out) > maxValues {
			v.errorf(k+".values", "values are %d bytes at most (put larger ones in valuesFiles)", maxValues)
		}
	}
}

func (v *validator) noRepository(k string, a *Addon, source string) {
	if a.Repository != "" {
		v.errorf(k+".repository", "a repository is for a chart by name; %s names the files", source)
	}
}

// existing checks that a file the inventory names is there (when the inventory was read from a file).
func (v *validator) existing(key, p string) {
	if strings.ContainsRune(p, 0) || len(p) > 4096 {
		v.errorf(key, "%q is not a file path", p)
		return
	}
	if v.inv.baseDir == "" {
		return
	}
	if _, err := os.Stat(v.inv.Resolve(p)); err != nil {
		v.errorf(key, "%s: %v", p, unwrapPathError(err))
	}
}

// unwrapPathError drops the path an *os.PathError repeats.
func unwrapPathError(err error) error {
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lastOr is the last of s, or def when s is empty.
func lastOr(s []string, def string) string {
	if len(s) > 0 {
		return s[len(s)-1]
	}
	return def
}

// isImageRef: registry/repository:tag, as cluster.extraImages takes.
func isImageRef(ref string) bool {
	_, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	return len(tag) <= 128 && imageRefRE.MatchString(ref) && len(ref) <= 512
}

// loopbackURL: the URL's host is this machine (a mirror on loopback).
func loopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	h := u.Hostname()
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}
