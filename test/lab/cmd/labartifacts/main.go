// Command labartifacts turns the binaries build-k8s.sh and build-runtime.sh made into an artifacts directory
// in the layout `clusterctl artifacts pull` makes: it packs the control-plane, etcd, kube-proxy, CoreDNS,
// pause and node-local proxy (haproxy) images as archives (no registry involved), lays out the runtime
// (containerd, its shim, ctr, crictl, Debian's runc) and the CNI plugins, and writes manifest.json with
// every file's SHA-256. With -verify it only checks an existing directory; with -versions it prints the
// versions clusterctl pairs with a Kubernetes version, as shell assignments.
//
//	labartifacts -dir ~/.cache/clusterctl-lab/v1.37.2 -pause PAUSE_BINARY -rootfs MERGED_NODE_ROOTFS -runtime RUNTIME_DIR
//	labartifacts -dir ~/.cache/clusterctl-lab/v1.37.2 -verify
//	labartifacts -versions v1.37.2
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/flannel"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/netpol"
	"github.com/clusterctl/clusterctl/test/lab/image"
)

func main() {
	dir := flag.String("dir", "", "the version directory (holds bin/linux-<arch>/ and bin/versions.env)")
	pause := flag.String("pause", "", "the pause binary to pack")
	rootfs := flag.String("rootfs", "", "a node root filesystem to take iptables from, for the kube-proxy image")
	runtimeDir := flag.String("runtime", "", "the runtime build-runtime.sh made (containerd, shim, ctr, crictl, CNI plugins)")
	networkDir := flag.String("network", "", "the pod network's programs build-network.sh made (flanneld, netpol)")
	verify := flag.Bool("verify", false, "only verify the directory against its manifest")
	versions := flag.String("versions", "", "print the versions paired with this Kubernetes version and exit")
	flag.Parse()
	if *versions != "" {
		v, err := pull.VersionsFor(*versions)
		if err != nil {
			fmt.Fprintln(os.Stderr, "labartifacts:", err)
			os.Exit(1)
		}
		fmt.Printf("CONTAINERD_VERSION=%s\nRUNC_VERSION=%s\nCNI_PLUGINS_VERSION=%s\nCRICTL_VERSION=%s\nFLANNEL_VERSION=%s\nNETPOL_VERSION=%s\n",
			v.Containerd, v.Runc, v.CNIPlugins, v.Crictl, flannel.Version, netpol.Version)
		return
	}
	if err := run(*dir, *pause, *rootfs, *runtimeDir, *networkDir, *verify); err != nil {
		fmt.Fprintln(os.Stderr, "labartifacts:", err)
		os.Exit(1)
	}
}

func run(dir, pause, rootfs, runtimeDir, networkDir string, verifyOnly bool) error {
	if dir == "" {
		return errors.New("-dir is required")
	}
	if verifyOnly {
		return verify(dir)
	}
	if pause == "" || rootfs == "" || runtimeDir == "" || networkDir == "" {
		return errors.New("-pause, -rootfs, -runtime and -network are required")
	}
	arch := runtime.GOARCH
	m, err := newManifest(dir)
	if err != nil {
		return err
	}
	binDir := filepath.Join(dir, "bin", "linux-"+arch)
	if err := writeImages(m, dir, arch, binDir, pause, rootfs, networkDir); err != nil {
		return err
	}
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			rel := "bin/linux-" + arch + "/" + e.Name()
			if err := m.Add(dir, artifacts.File{Path: rel, Kind: artifacts.KindBinary, Name: e.Name(), Arch: arch}); err != nil {
				return err
			}
		}
	}
	if err := layRuntime(m, dir, arch, runtimeDir, rootfs); err != nil {
		return err
	}
	if err := m.Write(dir); err != nil {
		return err
	}
	fmt.Printf("labartifacts: %s: Kubernetes %s, %d files\n", dir, m.KubernetesVersion, len(m.Files))
	return nil
}

// verify checks an artifacts directory against its manifest.
func verify(dir string) error {
	m, err := artifacts.Load(dir)
	if err != nil {
		return err
	}
	if err := m.Verify(dir); err != nil {
		return fmt.Errorf("%s does not match its manifest:\n%w", dir, err)
	}
	fmt.Printf("labartifacts: %s verified: Kubernetes %s, %d files\n", dir, m.KubernetesVersion, len(m.Files))
	return nil
}

// newManifest is the manifest of the versions the build wrote in bin/versions.env (and those paired with
// its Kubernetes version), with no file yet.
func newManifest(dir string) (*artifacts.Manifest, error) {
	vers, err := readEnv(filepath.Join(dir, "bin", "versions.env"))
	if err != nil {
		return nil, err
	}
	paired, err := pull.VersionsFor(vers["KUBERNETES_VERSION"])
	if err != nil {
		return nil, err
	}
	m := &artifacts.Manifest{KubernetesVersion: vers["KUBERNETES_VERSION"], EtcdVersion: vers["ETCD_VERSION"],
		CoreDNSVersion: vers["COREDNS_VERSION"], PauseVersion: vers["PAUSE_VERSION"],
		ContainerdVersion: paired.Containerd, RuncVersion: paired.Runc, CNIPluginsVersion: paired.CNIPlugins, CrictlVersion: paired.Crictl}
	for k, v := range map[string]string{"KUBERNETES_VERSION": m.KubernetesVersion, "ETCD_VERSION": m.EtcdVersion,
		"COREDNS_VERSION": m.CoreDNSVersion, "PAUSE_VERSION": m.PauseVersion} {
		if v == "" {
			return nil, fmt.Errorf("bin/versions.env has no %s", k)
		}
	}
	return m, nil
}

// writeImages writes the images nodes run, from the built binaries (binDir), the pause binary, flanneld
// and netpol (networkDir) and files of the node root filesystem (iptables for kube-proxy and flanneld, haproxy for the
// node-local proxy), into images/ and the manifest.
func writeImages(m *artifacts.Manifest, dir, arch, binDir, pause, rootfs, networkDir string) error {
	imgRel := "images/linux-" + arch
	if err := os.MkdirAll(filepath.Join(dir, imgRel), 0o755); err != nil {
		return err
	}
	bin := func(name string) string { return filepath.Join(binDir, name) }
	iptables, err := image.Collect(rootfs, image.IptablesFiles)
	if err != nil {
		return fmt.Errorf("collecting iptables for the kube-proxy image: %w", err)
	}
	haproxy, err := image.Collect(rootfs, haproxyFiles)
	if err != nil {
		return fmt.Errorf("collecting haproxy for the node-local proxy image: %w", err)
	}
	const repo = "registry.k8s.io"
	images := []struct {
		name, ref string
		files     []image.File
		cfg       image.Config
	}{
		{"kube-apiserver", repo + "/kube-apiserver:" + m.KubernetesVersion, binFiles(bin, "kube-apiserver"), image.Config{}},
		{"kube-controller-manager", repo + "/kube-controller-manager:" + m.KubernetesVersion, binFiles(bin, "kube-controller-manager"), image.Config{}},
		{"kube-scheduler", repo + "/kube-scheduler:" + m.KubernetesVersion, binFiles(bin, "kube-scheduler"), image.Config{}},
		{"kube-proxy", repo + "/kube-proxy:" + m.KubernetesVersion, append(binFiles(bin, "kube-proxy"), iptables...), image.Config{}},
		{"etcd", repo + "/etcd:" + strings.TrimPrefix(m.EtcdVersion, "v") + "-0", binFiles(bin, "etcd", "etcdctl"), image.Config{}},
		{"coredns", repo + "/coredns/coredns:" + m.CoreDNSVersion, []image.File{{Path: "/coredns", Source: bin("coredns")}},
			image.Config{Entrypoint: []string{"/coredns"}}},
		{"pause", repo + "/pause:" + m.PauseVersion, []image.File{{Path: "/pause", Source: pause, Mode: 0o755}},
			image.Config{Entrypoint: []string{"/pause"}}},
		{images.APIServerProxy, images.ProxyImage, haproxy, image.Config{Cmd: []string{"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"}}},
		// upstream's image has flanneld at /opt/bin, beside iptables (its masquerade and forward rules)
		{flannel.ImageName, flannel.Image, append([]image.File{{Path: "/opt/bin/flanneld", Source: filepath.Join(networkDir, "flanneld")}}, iptables...),
			image.Config{Entrypoint: []string{"/opt/bin/flanneld"}}},
		// upstream's image runs /bin/netpol; it talks netlink (nftables, nfqueue) and needs no other file
		{netpol.ImageName, netpol.Image, []image.File{{Path: "/bin/netpol", Source: filepath.Join(networkDir, "netpol")}},
			image.Config{Entrypoint: []string{"/bin/netpol"}}},
	}
	for _, img := range images {
		rel := imgRel + "/" + img.name + ".tar"
		img.cfg.Arch = arch
		digest, err := image.Write(filepath.Join(dir, filepath.FromSlash(rel)), img.ref, img.files, img.cfg)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.ref, err)
		}
		if err := m.Add(dir, artifacts.File{Path: rel, Kind: artifacts.KindImage, Name: img.name, Arch: arch, Image: img.ref,
			Digest: digest, Format: archive.Format}); err != nil {
			return err
		}
		fmt.Printf("labartifacts: %s -> %s\n", img.ref, rel)
	}
	return nil
}

// layRuntime copies the runtime into runtime/ and cni/ as `clusterctl artifacts pull` lays them out: the
// binaries build-runtime.sh made, and runc from the node root filesystem (Debian's; it links libseccomp,
// which every systemd host has).
func layRuntime(m *artifacts.Manifest, dir, arch, runtimeDir, rootfs string) error {
	type file struct{ kind, layout, name, src string }
	var files []file
	for _, n := range append(slices.Clone(pull.ContainerdBinaries), "crictl") {
		files = append(files, file{artifacts.KindRuntime, "runtime", n, filepath.Join(runtimeDir, n)})
	}
	files = append(files, file{artifacts.KindRuntime, "runtime", "runc", filepath.Join(rootfs, "usr/sbin/runc")})
	for _, n := range pull.CNIPlugins {
		files = append(files, file{artifacts.KindCNI, "cni", n, filepath.Join(runtimeDir, n)})
	}
	for _, f := range files {
		rel := f.layout + "/linux-" + arch + "/" + f.name
		data, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			return err
		}
		if err := m.Add(dir, artifacts.File{Path: rel, Kind: f.kind, Name: f.name, Arch: arch}); err != nil {
			return err
		}
	}
	return nil
}

func binFiles(bin func(string) string, names ...string) []image.File {
	var out []image.File
	for _, n := range names {
		out = append(out, image.File{Path: "/usr/local/bin/" + n, Source: bin(n)})
	}
	return out
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			out[k] = v
		}
	}
	return out, sc.Err()
}

// haproxyFiles are the node-local API proxy's image: Debian's haproxy and what it reads.
var haproxyFiles = []string{"/usr/sbin/haproxy", "/etc/ld.so.cache", "/etc/protocols", "/etc/services"}
