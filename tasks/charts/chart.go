// Package charts installs the inventory's add-ons (cluster.addons): Helm charts with the Helm SDK
// (helm.sh/helm/v4) and manifests with server-side apply, through the same connection to the API server
// clusterctl uses for everything else (the SSH tunnel: no route to port 6443 is needed). It loads charts
// from the artifacts directory (pulled and locked) or from a path beside the inventory, renders them to
// find their images, and plans and applies installs, upgrades and uninstalls of the releases it marked.
package charts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// MaxChart bounds a packaged chart read into memory (the largest common charts are a few MiB).
const MaxChart = 64 << 20

// Chart is a loaded chart and the digest of what it was loaded from (a .tgz's SHA-256, or a directory's
// files'): a release whose digest differs is upgraded even at the same version.
type Chart struct {
	*chart.Chart
	Digest string
}

// Load reads an add-on's chart: from the artifacts (a repository's or registry's chart, pulled and
// locked; its SHA-256 checked against the manifest) or from the inventory's path.
func Load(a *inventory.Addon, resolve func(string) string, artDir string, m *artifacts.Manifest) (*Chart, error) {
	var data []byte
	switch a.Source() {
	case inventory.AddonPath:
		p := resolve(a.Path)
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("add-on %s: path: %w", a.Name, err)
		}
		if st.IsDir() {
			ch, err := loader.LoadDir(p)
			if err != nil {
				return nil, fmt.Errorf("add-on %s: chart %s: %w", a.Name, p, err)
			}
			sum, err := dirDigest(p)
			if err != nil {
				return nil, err
			}
			return checked(a, &Chart{ch, sum})
		}
		if data, err = readBounded(p); err != nil {
			return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
		}
	case inventory.AddonRepository, inventory.AddonOCI:
		if m == nil {
			return nil, fmt.Errorf("add-on %s: no artifacts directory holds chart %s %s: clusterctl artifacts pull fetches it", a.Name, a.Chart, a.Version)
		}
		f := FindChart(m, a)
		if f == nil {
			return nil, fmt.Errorf("add-on %s: the artifacts directory has no chart %s %s from %s: clusterctl artifacts pull fetches it", a.Name, a.Chart, a.Version, a.Repository)
		}
		var err error
		if data, err = readBounded(filepath.Join(artDir, filepath.FromSlash(f.Path))); err != nil {
			return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
			return nil, fmt.Errorf("add-on %s: %s does not match its SHA-256 in the artifacts manifest (%s): pull it again", a.Name, f.Path, f.SHA256)
		}
	default:
		return nil, fmt.Errorf("add-on %s is manifests, not a chart", a.Name)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("add-on %s: chart: %w", a.Name, err)
	}
	sum := sha256.Sum256(data)
	return checked(a, &Chart{ch, hex.EncodeToString(sum[:])})
}

// checked refuses a chart that is not the one the inventory names.
func checked(a *inventory.Addon, c *Chart) (*Chart, error) {
	md := c.Metadata
	if md == nil {
		return nil, fmt.Errorf("add-on %s: the chart has no Chart.yaml", a.Name)
	}
	if a.Chart != "" && md.Name != a.Chart {
		return nil, fmt.Errorf("add-on %s: the chart pulled is %s, not %s", a.Name, md.Name, a.Chart)
	}
	if a.Version != "" && trimV(md.Version) != trimV(a.Version) {
		return nil, fmt.Errorf("add-on %s: the chart is %s %s, the inventory asks for version %s", a.Name, md.Name, md.Version, a.Version)
	}
	return c, nil
}

func trimV(v string) string {
	if len(v) > 0 && v[0] == 'v' {
		return v[1:]
	}
	return v
}

// FindChart is the artifacts' file of an add-on's chart.
func FindChart(m *artifacts.Manifest, a *inventory.Addon) *artifacts.File {
	for i := range m.Files {
		f := &m.Files[i]
		if f.Kind == artifacts.KindChart && f.Name == a.Chart && trimV(f.Version) == trimV(a.Version) && f.Repository == a.Repository {
			return f
		}
	}
	return nil
}

func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxChart+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxChart {
		return nil, fmt.Errorf("%s is larger than %d MiB", p, MaxChart>>20)
	}
	return data, nil
}

// dirDigest is the SHA-256 of a chart directory's regular files, names and contents, in lexical order.
func dirDigest(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := readBounded(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// Values are an add-on's values: its valuesFiles in order, each over the one before, then its inline
// values over them, as helm's --values and --set; numbers as Helm reads them from YAML (JSON's).
func Values(a *inventory.Addon, resolve func(string) string) (map[string]any, error) {
	out := map[string]any{}
	for i, f := range a.ValuesFiles {
		data, err := readBounded(resolve(f))
		if err != nil {
			return nil, fmt.Errorf("add-on %s: valuesFiles[%d]: %w", a.Name, i, err)
		}
		vals, err := loader.LoadValues(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("add-on %s: valuesFiles[%d] (%s): %w", a.Name, i, f, err)
		}
		out = loader.MergeMaps(out, vals)
	}
	if len(a.Values) > 0 {
		inline, err := normalize(map[string]any(a.Values))
		if err != nil {
			return nil, fmt.Errorf("add-on %s: values: %w", a.Name, err)
		}
		out = loader.MergeMaps(out, inline)
	}
	return out, nil
}

// normalize passes values through JSON, as Helm stores a release's: equal values compare equal.
func normalize(v map[string]any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, json.Unmarshal(data, &out)
}

// Package writes a chart directory as helm package does, into outDir, and returns the file's path and the
// chart's name and version (for the lab's repository and tests).
func Package(dir, outDir string) (file, name, version string, err error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return "", "", "", err
	}
	file, err = chartutil.Save(ch, outDir)
	return file, ch.Metadata.Name, ch.Metadata.Version, err
}
