package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// ChartsURL is the Helm repository the mirror serves the add-ons' charts from (index.yaml and packages).
func (m *Mirror) ChartsURL() string { return m.URL + "/charts" }

// ChartsOCI is the OCI registry path that holds the same charts (<path>/<chart>:<version>).
func (m *Mirror) ChartsOCI() string { return "oci://" + m.Registry + "/charts" }

// ServeAddons adds an add-ons directory (build-addons.sh's: charts and images) to the mirror: the charts
// as a Helm repository at ChartsURL and as OCI artifacts at ChartsOCI, the images in its registry, every
// file and image in its checksums file.
func (m *Mirror) ServeAddons(ctx context.Context, dir string) error {
	man, err := artifacts.Load(dir)
	if err != nil {
		return err
	}
	if err := man.Verify(dir); err != nil {
		return err
	}
	sums := map[string]string{}
	type entry struct {
		APIVersion string   `json:"apiVersion"`
		Name       string   `json:"name"`
		Version    string   `json:"version"`
		URLs       []string `json:"urls"`
		Digest     string   `json:"digest"`
	}
	index := struct {
		APIVersion string             `json:"apiVersion"`
		Entries    map[string][]entry `json:"entries"`
	}{"v1", map[string][]entry{}}
	if err := os.MkdirAll(filepath.Join(m.Root, "charts"), 0o755); err != nil {
		return err
	}
	for _, f := range man.Files {
		if f.Kind != artifacts.KindChart {
			continue
		}
		src := filepath.Join(dir, filepath.FromSlash(f.Path))
		base := path.Base(f.Path)
		if _, err := copyFile(src, filepath.Join(m.Root, "charts", base)); err != nil {
			return err
		}
		index.Entries[f.Name] = append(index.Entries[f.Name], entry{"v2", f.Name, f.Version, []string{base}, f.SHA256})
		sums[path.Join("charts", f.Name+"-"+strings.TrimPrefix(f.Version, "v")+".tgz")] = f.SHA256
		if err := m.pushChart(ctx, src, f); err != nil {
			return err
		}
	}
	data, err := sigsyaml.Marshal(index)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(m.Root, "charts", "index.yaml"), data, 0o644); err != nil {
		return err
	}
	if err := m.pushImages(ctx, man, dir, sums); err != nil {
		return err
	}
	f, err := os.OpenFile(m.Checksums, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for k, v := range sums {
		if _, err := fmt.Fprintf(f, "%s  %s\n", v, k); err != nil {
			return err
		}
	}
	return f.Close()
}

// pushChart puts a packaged chart in the registry as helm push does: a manifest whose config is Helm's
// and whose one layer is the package.
func (m *Mirror) pushChart(ctx context.Context, file string, f artifacts.File) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	cfg, err := sigsyaml.Marshal(map[string]string{"name": f.Name, "version": f.Version})
	if err != nil {
		return err
	}
	cfgJSON, err := sigsyaml.YAMLToJSON(cfg)
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(data, "application/vnd.cncf.helm.chart.content.v1.tar+gzip")})
	if err != nil {
		return err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.cncf.helm.config.v1+json")
	img = &rawConfig{Image: img, raw: cfgJSON}
	dst, err := name.NewTag(m.Registry + "/charts/" + f.Name + ":" + strings.TrimPrefix(f.Version, "v"))
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w", dst, err)
	}
	return nil
}

// rawConfig is an image whose config blob is given bytes (a Helm chart's metadata, not an image config).
type rawConfig struct {
	v1.Image
	raw []byte
}

func (r *rawConfig) RawConfigFile() ([]byte, error) { return r.raw, nil }

func (r *rawConfig) ConfigName() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(r.raw))
	return h, err
}

func (r *rawConfig) Manifest() (*v1.Manifest, error) {
	mf, err := r.Image.Manifest()
	if err != nil {
		return nil, err
	}
	mf = mf.DeepCopy()
	h, err := r.ConfigName()
	if err != nil {
		return nil, err
	}
	mf.Config.Digest, mf.Config.Size = h, int64(len(r.raw))
	return mf, nil
}

func (r *rawConfig) RawManifest() ([]byte, error) {
	mf, err := r.Manifest()
	if err != nil {
		return nil, err
	}
	return json.Marshal(mf)
}

func (r *rawConfig) Digest() (v1.Hash, error) {
	raw, err := r.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}
