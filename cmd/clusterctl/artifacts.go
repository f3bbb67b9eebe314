package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/charts"
)

type pullOptions struct {
	version, out, imageRepository, checksums, lock string
	arches, extraImages, insecureRegistries        []string
	parallel                                       int
	noImages, allowHTTP, requireLock               bool
	sources                                        pull.Sources
}

func newArtifactsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifacts",
		Short: "Download, verify and list what nodes need: Kubernetes binaries, the runtime, images",
		Long: `An artifacts directory holds everything a node needs for one Kubernetes version, so that hosts
need no internet access: the kubelet and kubectl, etcdctl and etcdutl, containerd, runc, the CNI plugins
and crictl, and the images (control plane, kube-proxy, etcd, CoreDNS, pause, the node-local API proxy, and
the inventory's extraImages) as archives ctr imports. Its manifest.json lists every file with its SHA-256.

clusterctl up pulls one into the cache by itself when the inventory names none (cluster.artifacts).`,
		Example: `  clusterctl artifacts pull --kubernetes-version v1.37.2
  clusterctl artifacts pull -i hosts.yaml --arch amd64,arm64 --dir ./artifacts
  clusterctl artifacts verify --dir ./artifacts
  clusterctl artifacts list -o json`,
	}
	cmd.AddCommand(newArtifactsPullCmd(g), newArtifactsVerifyCmd(g), newArtifactsListCmd(g))
	return cmd
}

func newArtifactsPullCmd(g *globalOptions) *cobra.Command {
	o := &pullOptions{}
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "Download and verify a version's artifacts into a directory (default: the per-version cache)",
		Long: `Download everything nodes of the given architectures need for one Kubernetes version, check every
file against the checksum its project publishes, and lay it out as clusterctl up takes it:

  kubelet, kubectl   <release-url>/release/<version>/bin/linux/<arch>/<name>, checked against <name>.sha256
  etcdctl, etcdutl   etcd's release archive, checked against its SHA256SUMS
  containerd         containerd's static release archive (containerd, containerd-shim-runc-v2, ctr)
  runc, CNI plugins, crictl   their release files, each checked against its published sum
  images             from the image repository (or --registry-mirror), saved as OCI archives that keep
                     the registry's manifest and name the image by tag and digest; digests recorded
                     (nodes run each image by tag and digest)

Versions of etcd, CoreDNS and pause follow kubeadm's pairing; containerd, runc, the CNI plugins and
crictl clusterctl's (clusterctl artifacts list shows them). Downloads run in parallel and continue where an
interrupted run stopped (Range requests); a file is renamed into place only once verified, and a checksum
mismatch is an error naming the file, the URL, and both digests, with nothing of the file kept. Proxies are
taken from HTTPS_PROXY/HTTP_PROXY/NO_PROXY; registry credentials from the Docker config
(~/.docker/config.json), never from the inventory.

A checksum from a file's own origin proves nothing against that origin, so every file is also checked
against a digest from elsewhere: --checksums FILE ("<sha256>  <path>" lines, path as in the directory:
bin/linux-amd64/kubelet, downloads/<archive>, runtime/linux-amd64/runc), then digests built into
clusterctl for releases whose digests are public, then the lock: one file across versions and
architectures (--lock, cluster.downloads.lock; default $XDG_CACHE_HOME/clusterctl/artifacts.lock) that
every verified pull adds to, as go.sum: a later pull or mirror that serves other bytes (or another image
digest) is refused, naming the file, the URL, and the locked and received digests. Commit the lock beside
the inventory and every workstation and CI job pins the same bytes, upgrades included. What nothing pins
yet is said on stderr once per file ("first pull of ..."); --require-lock (cluster.downloads.requireLock)
refuses it instead, for CI.

Plain HTTP: a redirect from https to http is refused; http:// base URLs only on loopback or with
--allow-http, and every file must then match --checksums, a built-in digest or the lock; registries over
plain HTTP only when named with --insecure-registry, no credentials are sent to them, and every image from
them must match a digest of --checksums or the lock. The directory must not be writable by others nor owned
by another user, nor any directory above it writable by others (exit 2); files are never written through
a symbolic link.

With -i, the inventory gives the version, imageRepository, extraImages and cluster.downloads; flags win.
The manifest is written last: a directory with a manifest.json is complete.`,
		Example: `  clusterctl artifacts pull --kubernetes-version v1.37.2
  clusterctl artifacts pull -i hosts.yaml --dir /srv/k8s-artifacts
  clusterctl artifacts pull --kubernetes-version v1.37.2 --release-url https://mirror.example/k8s \
      --registry-mirror registry.example:5000 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPull(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.version, "kubernetes-version", "", "Kubernetes version (default: the inventory's, else "+inventory.DefaultKubernetesVersion+")")
	f.StringSliceVar(&o.arches, "arch", []string{"amd64"}, "node architectures (amd64, arm64; comma-separated)")
	f.StringVar(&o.out, "dir", "", "directory to fill (default: the inventory's cluster.artifacts with -i, else the per-version cache, "+displayCache()+")")
	f.StringVar(&o.out, "out", "", "")
	_ = f.MarkDeprecated("out", "use --dir (every artifacts command names its directory with --dir)")
	f.StringVar(&o.imageRepository, "image-repository", "", "registry and path of the Kubernetes images (default: the inventory's, else registry.k8s.io)")
	f.StringSliceVar(&o.extraImages, "extra-image", nil, "more images to pull (registry/repository:tag; added to the inventory's extraImages)")
	f.IntVar(&o.parallel, "parallel", 4, "downloads at once")
	f.BoolVar(&o.noImages, "no-images", false, "leave the images out: hosts pull them from a registry (cluster.registry.pull; the default with -i and that setting)")
	f.StringVar(&o.sources.Release, "release-url", "", "Kubernetes release base URL (default https://dl.k8s.io)")
	f.StringVar(&o.sources.Etcd, "etcd-url", "", "etcd release download base URL")
	f.StringVar(&o.sources.Containerd, "containerd-url", "", "containerd release download base URL")
	f.StringVar(&o.sources.Runc, "runc-url", "", "runc release download base URL")
	f.StringVar(&o.sources.CNI, "cni-url", "", "CNI plugins release download base URL")
	f.StringVar(&o.sources.Crictl, "crictl-url", "", "crictl (cri-tools) release download base URL")
	f.StringVar(&o.sources.RegistryMirror, "registry-mirror", "", "registry (host[:port][/path]) to fetch images from instead of the one each reference names")
	f.StringVar(&o.checksums, "checksums", "", "file of trusted SHA-256 digests (\"<sha256>  <path>\" lines, as the lock) every download must match (default: the inventory's cluster.downloads.checksums)")
	f.BoolVar(&o.allowHTTP, "allow-http", false, "allow plain-HTTP download URLs off loopback (every file must then match --checksums, a built-in digest or the lock)")
	f.StringSliceVar(&o.insecureRegistries, "insecure-registry", nil, "registry (host:port) images may be fetched from over plain HTTP, without credentials (repeatable)")
	f.StringVar(&o.lock, "lock", "", "the lock every download is checked against and added to, across versions (default: the inventory's cluster.downloads.lock, else $XDG_CACHE_HOME/clusterctl/artifacts.lock)")
	f.BoolVar(&o.requireLock, "require-lock", false, "refuse any file or image that --checksums, a built-in digest or the lock does not pin (for CI; default: the inventory's cluster.downloads.requireLock)")
	return cmd
}

// displayCache names the per-version cache as help shows it (the same on every machine).
func displayCache() string {
	return "$XDG_CACHE_HOME/clusterctl/artifacts/<version>, by default ~/.cache/clusterctl/artifacts/<version>"
}

// pullRequest is what to pull, from the inventory (when -i is given) and the flags.
func pullRequest(g *globalOptions, o *pullOptions) (pull.Options, error) {
	req := pull.Options{KubernetesVersion: o.version, Arches: o.arches, Dir: o.out, ImageRepository: o.imageRepository, Parallel: o.parallel, SkipImages: o.noImages}
	for _, a := range o.arches {
		if a != "amd64" && a != "arm64" {
			return req, usageError("--arch %q: the architectures clusterctl pulls for are amd64 and arm64", a)
		}
	}
	sources := pull.DefaultSources()
	if g.Inventory != "" {
		inv, _, err := g.loadInventory()
		if err != nil {
			return req, err
		}
		c := inv.Cluster
		if req.KubernetesVersion == "" {
			req.KubernetesVersion = c.KubernetesVersion
		}
		if req.Dir == "" {
			req.Dir = inv.Resolve(c.Artifacts)
		}
		if req.ImageRepository == "" {
			req.ImageRepository = c.ImageRepository
		}
		req.ExtraImages = append(req.ExtraImages, c.ExtraImages...)
		req.Optional = playbooks.NetworkImages(inv)
		req.Charts, req.AddonImages = charts.PullCharts(inv), charts.PullImages(inv)
		req.SkipImages = req.SkipImages || c.Registry.Pull
		sources = sources.Override(pull.SourcesOf(c.Downloads))
		if c.Downloads.Checksums != "" {
			req.Checksums = inv.Resolve(c.Downloads.Checksums)
		}
		req.AllowHTTP = c.Downloads.AllowHTTP
		req.InsecureRegistries = c.Downloads.InsecureRegistries
		if c.Downloads.Lock != "" {
			req.Lock = inv.Resolve(c.Downloads.Lock)
		}
		req.RequireLock = c.Downloads.RequireLock
	}
	if o.checksums != "" {
		req.Checksums = o.checksums
	}
	if o.lock != "" {
		req.Lock = o.lock
	}
	req.RequireLock = req.RequireLock || o.requireLock
	req.AllowHTTP = req.AllowHTTP || o.allowHTTP
	req.InsecureRegistries = append(req.InsecureRegistries, o.insecureRegistries...)
	req.ExtraImages = append(req.ExtraImages, o.extraImages...)
	req.Sources = sources.Override(o.sources)
	if req.KubernetesVersion == "" {
		req.KubernetesVersion = inventory.DefaultKubernetesVersion
	}
	if err := req.Sources.Validate(); err != nil {
		return req, usageError("%v", err)
	}
	if err := req.Sources.CheckSchemes(req.AllowHTTP); err != nil {
		return req, usageError("%v", err)
	}
	if _, err := pull.VersionsFor(req.KubernetesVersion); err != nil {
		return req, usageError("%v", err)
	}
	if req.Dir == "" {
		d, err := pull.CacheDir(req.KubernetesVersion)
		if err != nil {
			return req, err
		}
		req.Dir = d
	}
	if err := pull.CheckDir(req.Dir); err != nil {
		return req, err
	}
	return req, nil
}

func runPull(cmd *cobra.Command, g *globalOptions, o *pullOptions) error {
	req, err := pullRequest(g, o)
	if err != nil {
		return err
	}
	if err := offline(); err != nil {
		return err
	}
	view := newPullView(g.stderr, g.Output)
	if g.Output == "json" {
		view = newPullView(g.stdout, g.Output)
	}
	view.notices = g.stderr
	req.Events = view.event
	start := time.Now()
	m, err := pull.Pull(cmd.Context(), req)
	view.finish()
	if err != nil {
		return err
	}
	if g.Output == "json" {
		took := time.Since(start)
		return writeLast(g.stdout, "pull_result", "ok", "", map[string]any{"dir": req.Dir, "kubernetesVersion": m.KubernetesVersion,
			"files": len(m.Files), "downloaded_bytes": view.downloaded}, &took)
	}
	fmt.Fprintf(g.stdout, "%s: Kubernetes %s for %s, %d files verified (%s downloaded) in %s\n", req.Dir, m.KubernetesVersion,
		strings.Join(req.Arches, ","), len(m.Files), formatSize(view.downloaded), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// pullView shows a pull's progress: on a terminal a line per active download (bytes, rate, ETA) redrawn in
// place and a line per finished file; plain lines per finished file otherwise; JSON lines with -o json.
type pullView struct {
	mu         sync.Mutex
	w          io.Writer
	mode       string
	enc        *json.Encoder
	active     map[string]pull.Event
	drawn      int
	last       time.Time
	downloaded int64
	notices    io.Writer // where what nothing pinned is said (stderr)
}

func newPullView(w io.Writer, output string) *pullView {
	v := &pullView{w: w, active: map[string]pull.Event{}, mode: "plain"}
	switch {
	case output == "json":
		v.mode, v.enc = "json", json.NewEncoder(w)
	case isTerminal(w):
		v.mode = "tty"
	}
	return v
}

func (v *pullView) event(e pull.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.Type == pull.EventFileDone && !e.Cached {
		v.downloaded += e.Bytes
	}
	if e.Type == pull.EventUnpinned && v.notices != nil {
		if v.mode == "tty" {
			v.clear()
		}
		fmt.Fprintln(v.notices, unpinnedLine(e))
		if v.mode == "tty" {
			v.draw()
		}
	}
	switch v.mode {
	case "json":
		_ = v.enc.Encode(e)
	case "plain":
		if e.Type == pull.EventFileDone {
			fmt.Fprintln(v.w, doneLine(e))
		}
	default:
		if e.Type == pull.EventFileDone {
			delete(v.active, e.File)
			v.clear()
			fmt.Fprintln(v.w, doneLine(e))
			v.draw()
			return
		}
		v.active[e.File] = e
		if time.Since(v.last) > 200*time.Millisecond {
			v.clear()
			v.draw()
		}
	}
}

func doneLine(e pull.Event) string {
	if e.Cached {
		return fmt.Sprintf("  %-48s cached, verified", e.File)
	}
	return fmt.Sprintf("  %-48s %9s in %s, verified", e.File, formatSize(e.Bytes), (time.Duration(e.DurationMS) * time.Millisecond).Round(10*time.Millisecond))
}

func (v *pullView) clear() {
	for ; v.drawn > 0; v.drawn-- {
		fmt.Fprint(v.w, "\033[1A\r\033[K")
	}
}

func (v *pullView) draw() {
	files := make([]string, 0, len(v.active))
	for f := range v.active {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		e := v.active[f]
		total, eta := "?", "?"
		if e.Total > 0 {
			total = formatSize(e.Total)
		}
		if e.ETAMS > 0 {
			eta = (time.Duration(e.ETAMS) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(v.w, "  %-48s %9s / %-9s %9s/s  ETA %s\n", f, formatSize(e.Bytes), total, formatSize(e.Rate), eta)
		v.drawn++
	}
	v.last = time.Now()
}

func (v *pullView) finish() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mode == "tty" {
		v.clear()
	}
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// artifactsDirOptions name the artifacts directory verify and list read: --dir, else the directory up would
// use (the inventory's cluster.artifacts with -i, else the per-version cache of the version asked for).
type artifactsDirOptions struct {
	dir     string
	version string
}

func (o *artifactsDirOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dir, "dir", "", "the artifacts directory (default: the inventory's cluster.artifacts with -i, else the per-version cache, "+displayCache()+")")
	cmd.Flags().StringVar(&o.version, "kubernetes-version", "", "which version's cache directory, without --dir (default: the inventory's, else "+inventory.DefaultKubernetesVersion+")")
}

// resolve finds the directory and loads its manifest; a directory without one is a usage error that says
// how to fill it.
func (o *artifactsDirOptions) resolve(g *globalOptions, cmd *cobra.Command, args []string) (string, *artifacts.Manifest, error) {
	if len(args) > 0 {
		return "", nil, usageError("%s takes the directory as --dir %s, not as an argument", cmd.CommandPath(), args[0])
	}
	dir, version := o.dir, o.version
	if dir == "" && g.Inventory != "" {
		inv, _, err := g.loadInventory()
		if err != nil {
			return "", nil, err
		}
		dir = inv.Resolve(inv.Cluster.Artifacts)
		if version == "" {
			version = inv.Cluster.KubernetesVersion
		}
	}
	if dir == "" {
		if version == "" {
			version = inventory.DefaultKubernetesVersion
		}
		if err := inventory.CheckKubernetesVersion(version); err != nil {
			return "", nil, usageError("--kubernetes-version: %v", err)
		}
		d, err := pull.CacheDir(version)
		if err != nil {
			return "", nil, err
		}
		dir = d
	}
	if _, err := os.Stat(filepath.Join(dir, artifacts.ManifestFile)); errors.Is(err, fs.ErrNotExist) {
		fill := "clusterctl artifacts pull --dir " + dir
		if version != "" {
			fill = "clusterctl artifacts pull --kubernetes-version " + version + " --dir " + dir
		}
		return "", nil, usageError("%s holds no artifacts (no %s): fill it with %s", dir, artifacts.ManifestFile, fill)
	}
	m, err := artifacts.Load(dir)
	if err != nil {
		return "", nil, err
	}
	return dir, m, nil
}

func newArtifactsVerifyCmd(g *globalOptions) *cobra.Command {
	o := &artifactsDirOptions{}
	cmd := &cobra.Command{
		Use:     "verify",
		Short:   "Check every file of an artifacts directory against its manifest (size and SHA-256)",
		Example: "  clusterctl artifacts verify --kubernetes-version v1.37.2\n  clusterctl artifacts verify --dir ./artifacts -o json",
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, m, err := o.resolve(g, cmd, args)
			if err != nil {
				return err
			}
			if err := m.Verify(dir); err != nil {
				return fmt.Errorf("%s does not match its manifest:\n%w", dir, err)
			}
			if g.Output == "json" {
				return writeReport(g.stdout, "artifacts_verification", "ok", map[string]any{"dir": dir, "kubernetesVersion": m.KubernetesVersion, "files": len(m.Files), "verified": true})
			}
			_, err = fmt.Fprintf(g.stdout, "%s: Kubernetes %s, %d files verified\n", dir, m.KubernetesVersion, len(m.Files))
			return err
		},
	}
	o.addFlags(cmd)
	return cmd
}

func newArtifactsListCmd(g *globalOptions) *cobra.Command {
	o := &artifactsDirOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List an artifacts directory: versions, and every file with its kind, architecture, size and digest",
		Example: "  clusterctl artifacts list\n  clusterctl artifacts list -i hosts.yaml\n  clusterctl artifacts list --dir ./artifacts -o json | jq '.files[] | select(.kind==\"image\") | .image'",
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, m, err := o.resolve(g, cmd, args)
			if err != nil {
				return err
			}
			if g.Output == "json" {
				return writeReport(g.stdout, "artifacts", "ok", m)
			}
			fmt.Fprintf(g.stdout, "Kubernetes %s, etcd %s, CoreDNS %s, pause %s, containerd %s, runc %s, CNI plugins %s, crictl %s\n\n",
				m.KubernetesVersion, m.EtcdVersion, m.CoreDNSVersion, m.PauseVersion, m.ContainerdVersion, m.RuncVersion, m.CNIPluginsVersion, m.CrictlVersion)
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tNAME\tARCH\tSIZE\tSHA256\tIMAGE")
			for _, f := range m.Files {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Kind, f.Name, f.Arch, formatSize(f.Size), f.SHA256[:min(12, len(f.SHA256))], f.Image)
			}
			return tw.Flush()
		},
	}
	o.addFlags(cmd)
	return cmd
}

// unpinnedLine says that a file or image was pulled for the first time with nothing to check it against
// but its origin's checksum.
func unpinnedLine(e pull.Event) string {
	return fmt.Sprintf("first pull of %s: no checksums file, built-in digest or lock line pins it; its digest %s (from %s) is now in %s: check it against a source you trust, or pull with --require-lock",
		e.File, e.Digest, e.URL, e.Lock)
}
