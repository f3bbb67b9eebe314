// Command labaddons packs the third-party add-ons the lab proves cluster.addons with, as build-addons.sh
// built them from the Go module proxy and Debian's packages: their charts, unmodified from the modules
// (packaged as helm package does), and their images from the programs built (local-path-provisioner,
// metrics-server, and busybox from Debian's busybox-static for local-path-provisioner's helper Pods),
// named as the charts name them; and the two images flannel's chart runs, under the lab's own names (the
// test sets them as the chart's values): flanneld with flannel's install-conf and iptables, and flannel's
// CNI plugin beside busybox's cp, which the chart's init container runs. It writes an artifacts directory
// (manifest.json with every file's SHA-256) that the lab mirror serves as a Helm repository, OCI charts
// and registry images.
//
//	labaddons -out DIR -chart DIR... -image REF=BINARY:PATH... -busybox BINARY \
//	  -flannel-image REF -flanneld BINARY -install-conf BINARY -rootfs DIR -cni-plugin-image REF=BINARY
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/charts"
	"github.com/clusterctl/clusterctl/test/lab/image"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	out := flag.String("out", "", "the directory to write (an artifacts directory of charts and images)")
	busybox := flag.String("busybox", "", "a static busybox: the image busybox:latest, with every applet linked")
	var chartDirs, imgs list
	flag.Var(&chartDirs, "chart", "a chart directory to package (repeatable)")
	flag.Var(&imgs, "image", "REF=BINARY:PATH: an image holding one static program at PATH, run from PATH's directory on $PATH (repeatable)")
	var fl flannel
	flag.StringVar(&fl.ref, "flannel-image", "", "REF: flanneld's image, as the chart runs it (flanneld and install-conf at /opt/bin, iptables)")
	flag.StringVar(&fl.flanneld, "flanneld", "", "flanneld, as build-network.sh built it")
	flag.StringVar(&fl.installConf, "install-conf", "", "flannel's install-conf (cmd/install_conf)")
	flag.StringVar(&fl.rootfs, "rootfs", "", "the node root filesystem iptables is taken from")
	flag.StringVar(&fl.cniPlugin, "cni-plugin-image", "", "REF=BINARY: the image the chart copies the flannel CNI plugin from (/flannel, beside busybox)")
	flag.Parse()
	if err := run(*out, *busybox, chartDirs, imgs, fl); err != nil {
		fmt.Fprintln(os.Stderr, "labaddons:", err)
		os.Exit(1)
	}
}

// flannel is what flannel's chart runs: its flanneld image and its CNI plugin's image.
type flannel struct{ ref, flanneld, installConf, rootfs, cniPlugin string }

func run(out, busybox string, chartDirs, imgs []string, fl flannel) error {
	if out == "" || busybox == "" {
		return errors.New("-out and -busybox are required")
	}
	if (fl.ref == "") != (fl.cniPlugin == "") || fl.ref != "" && (fl.flanneld == "" || fl.installConf == "" || fl.rootfs == "") {
		return errors.New("-flannel-image needs -cni-plugin-image, -flanneld, -install-conf and -rootfs")
	}
	arch := runtime.GOARCH
	m := &artifacts.Manifest{}
	if err := os.MkdirAll(filepath.Join(out, "charts"), 0o755); err != nil {
		return err
	}
	for _, dir := range chartDirs {
		file, name, version, err := charts.Package(dir, filepath.Join(out, "charts"))
		if err != nil {
			return fmt.Errorf("chart %s: %w", dir, err)
		}
		base := filepath.Base(file)
		if err := m.Add(out, artifacts.File{Path: path.Join("charts", base), Kind: artifacts.KindChart, Name: name, Version: version}); err != nil {
			return err
		}
	}
	all, err := labImages(busybox, imgs, fl)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "images", "linux-"+arch), 0o755); err != nil {
		return err
	}
	for _, im := range all {
		rel := path.Join("images", "linux-"+arch, pull.ExtraImageName(im.ref)+".tar")
		digest, err := image.Write(filepath.Join(out, filepath.FromSlash(rel)), im.ref, im.files, image.Config{Env: im.env, Entrypoint: im.entrypoint, Arch: arch})
		if err != nil {
			return err
		}
		if err := m.Add(out, artifacts.File{Path: rel, Kind: artifacts.KindImage, Name: pull.ExtraImageName(im.ref), Arch: arch, Image: im.ref,
			Digest: digest, Format: archive.Format}); err != nil {
			return err
		}
	}
	if err := m.Write(out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "labaddons: %s: %d files\n", out, len(m.Files))
	return nil
}

// img is an image the lab builds: its files, environment and entrypoint.
type img struct {
	ref        string
	files      []image.File
	env        []string
	entrypoint []string
}

// labImages are the images to build: busybox, flannel's two when asked, and one per -image.
func labImages(busybox string, imgs []string, fl flannel) ([]img, error) {
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	bbFiles := []image.File{{Path: "/bin/busybox", Source: busybox, Mode: 0o755}}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			bbFiles = append(bbFiles, image.File{Path: "/bin/" + a, Link: "busybox"})
		}
	}
	all := []img{{"docker.io/library/busybox:latest", bbFiles, []string{"PATH=/bin"}, []string{"/bin/sh"}}}
	if fl.ref != "" {
		iptables, err := image.Collect(fl.rootfs, image.IptablesFiles)
		if err != nil {
			return nil, fmt.Errorf("collecting iptables for flanneld's image: %w", err)
		}
		// upstream's image: flanneld and install-conf at /opt/bin, iptables for its masquerade and
		// forward rules
		all = append(all, img{fl.ref, append([]image.File{{Path: "/opt/bin/flanneld", Source: fl.flanneld, Mode: 0o755},
			{Path: "/opt/bin/install-conf", Source: fl.installConf, Mode: 0o755}}, iptables...),
			[]string{"PATH=/opt/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, []string{"/opt/bin/flanneld"}})
		ref, bin, ok := strings.Cut(fl.cniPlugin, "=")
		if !ok {
			return nil, fmt.Errorf("-cni-plugin-image %q: want REF=BINARY", fl.cniPlugin)
		}
		// the chart's init container runs `cp -f /flannel /opt/cni/bin/flannel`
		all = append(all, img{ref, append([]image.File{{Path: "/flannel", Source: bin, Mode: 0o755}}, bbFiles...), []string{"PATH=/bin"}, []string{"/bin/sh"}})
	}
	for _, spec := range imgs {
		ref, rest, ok1 := strings.Cut(spec, "=")
		bin, at, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(at, "/") {
			return nil, fmt.Errorf("-image %q: want REF=BINARY:/PATH", spec)
		}
		all = append(all, img{ref, []image.File{{Path: at, Source: bin, Mode: 0o755}, {Path: "/tmp", Dir: true, Mode: 0o1777}},
			[]string{"PATH=" + path.Dir(at) + ":/usr/local/bin:/usr/bin:/bin"}, []string{at}})
	}
	return all, nil
}
