// Command labconformance packs the container images Kubernetes' [Conformance] tests run, offline: the Go
// programs built from the Kubernetes module (agnhost, sample-apiserver, nnp), busybox built from source, and
// Debian's programs from the lab's e2e root filesystem layer (dig, curl, nginx, ...), under the names the
// suite asks for. Images it does not make are listed with the reason.
//
//	labconformance -list images.txt -bin DIR -src DIR -rootfs DIR -coredns FILE -busybox FILE -out DIR
//
// -list is `e2e.test --list-images`; -bin holds agnhost, sample-apiserver and nnp; -src is the
// k8s.io/kubernetes module (test/images/...); -rootfs is the base and e2e layers merged. It writes every
// image into one archive, -out/images.tar (ctr and docker load it), and -out/images.txt: "ref images.tar"
// per image made, "ref -" and the reason for one not made.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/clusterctl/clusterctl/test/lab/image"
)

func main() {
	var o options
	flag.StringVar(&o.list, "list", "", "the output of e2e.test --list-images")
	flag.StringVar(&o.bin, "bin", "", "directory with agnhost, sample-apiserver, nnp")
	flag.StringVar(&o.src, "src", "", "the k8s.io/kubernetes module directory")
	flag.StringVar(&o.rootfs, "rootfs", "", "the lab's base and e2e root filesystem layers, merged")
	flag.StringVar(&o.coredns, "coredns", "", "a coredns binary (agnhost and glibc-dns-testing carry one)")
	flag.StringVar(&o.busybox, "busybox", "", "a static busybox built as upstream builds it")
	flag.StringVar(&o.out, "out", "", "output directory")
	flag.Parse()
	if o.list == "" || o.bin == "" || o.src == "" || o.rootfs == "" || o.coredns == "" || o.busybox == "" || o.out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := o.run(); err != nil {
		fmt.Fprintln(os.Stderr, "labconformance:", err)
		os.Exit(1)
	}
}

type options struct{ list, bin, src, rootfs, coredns, busybox, out string }

// debianPrograms are the programs agnhost's and glibc-dns-testing's users run that busybox's applets (in
// /bin: ls, cat, wget, seq, awk, ...) do not stand in for: dig, nslookup and host from bind9, curl, netcat,
// socat, ip, ss, getent.
var debianPrograms = []string{
	"/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/host", "/usr/bin/curl", "/usr/bin/nc.openbsd",
	"/usr/bin/socat", "/usr/bin/getent", "/usr/bin/ip", "/usr/bin/ss",
	"/etc/ssl/certs/ca-certificates.crt", "/etc/protocols", "/etc/services", "/etc/ld.so.cache",
}

// passwd and group are the users of the images (agnhost's Dockerfile adds the two "defined-in-image" ones,
// which tests of runAsUser and supplemental groups look for; nginx runs as www-data).
const passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" +
	"www-data:x:33:33:www-data:/var/www:/bin/false\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
const group = "root:x:0:\nnogroup:x:65534:\nwww-data:x:33:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"

// nginxConf serves /usr/share/nginx/html on port 80, as the upstream nginx image does.
const nginxConf = `user www-data;
worker_processes 1;
error_log /dev/stderr;
pid /run/nginx.pid;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    access_log /dev/stdout;
    server {
        listen 80;
        listen [::]:80;
        location / { root /usr/share/nginx/html; index index.html; }
    }
}
`

func (o options) run() error {
	refs, err := readList(o.list)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	u, err := o.userland()
	if err != nil {
		return err
	}
	var report []string
	var images []image.Image
	for _, ref := range refs {
		name, tag := splitRef(ref)
		var layers [][]image.File
		var cfg image.Config
		reason := "not run by the [Conformance] tests"
		switch repo := path.Dir(name); {
		case repo == "registry.k8s.io" && (path.Base(name) == "etcd" || path.Base(name) == "pause"):
			reason = "the cluster's own image (clusterctl's artifacts)"
		case repo == "registry.k8s.io/e2e-test-images":
			layers, cfg, reason = o.recipe(path.Base(name), u)
		case strings.Contains(name, "authenticated") || strings.HasPrefix(name, "invalid."):
			reason = "a private or invalid registry's: the tests expect pulling it to fail"
		}
		if reason == "" && tag == "" {
			reason = "no tag"
		}
		if reason != "" {
			report = append(report, fmt.Sprintf("%s - %s", ref, reason))
			continue
		}
		cfg.Arch = runtime.GOARCH
		images = append(images, image.Image{Ref: ref, Layers: layers, Config: cfg})
		report = append(report, ref+" "+archive)
	}
	// One archive: the layers the images share (Debian's userland, agnhost) are in it once.
	if err := image.WriteAll(filepath.Join(o.out, archive), images); err != nil {
		return err
	}
	sort.Strings(report)
	return os.WriteFile(filepath.Join(o.out, "images.txt"), []byte(strings.Join(report, "\n")+"\n"), 0o644)
}

// archive is the file of every image made.
const archive = "images.tar"

// recipe is the layers of the image named name (the last element of its repository), or why it is not
// made. Images share their lower layers, as upstream's are built FROM one another.
//
// busybox's ash is every image's shell, as in upstream's: upstream's build of busybox, not Debian's, which
// runs its own applets before programs on PATH (`nc -v` in agnhost ran busybox's nc, which has no -v) and
// drops environment variables whose names are not shell names (a Secret's "data-1" in `sh -c env`).
// busybox's own image has no Debian programs: its nc and the rest are busybox's.
func (o options) recipe(name string, u userland) ([][]image.File, image.Config, string) {
	bin := func(p string) string { return filepath.Join(o.bin, p) }
	agnhost := []image.File{
		{Path: "/agnhost", Source: bin("agnhost"), Mode: 0o755},
		{Path: "/agnhost-2", Link: "agnhost"},
		{Path: "/coredns", Source: o.coredns, Mode: 0o755},
		{Path: "/localhost.crt", Source: filepath.Join(o.src, "test/images/agnhost/porter/localhost.crt")},
		{Path: "/localhost.key", Source: filepath.Join(o.src, "test/images/agnhost/porter/localhost.key")},
		{Path: "/uploads", Dir: true}}
	switch name {
	case "agnhost":
		return [][]image.File{u.busybox, u.bash, u.debian, agnhost}, image.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}}, ""
	case "kitten", "nautilus":
		// FROM agnhost, with a picture and a JSON file its test-webserver serves.
		web := []image.File{
			{Path: "/" + name + ".jpg", Source: filepath.Join(o.src, "test/images", name, "html", name+".jpg")},
			{Path: "/data.json", Source: filepath.Join(o.src, "test/images", name, "html", "data.json")}}
		return [][]image.File{u.busybox, u.bash, u.debian, agnhost, web}, image.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}}, ""
	case "busybox":
		return [][]image.File{u.busybox, u.bash}, image.Config{Cmd: []string{"sh"}}, ""
	case "glibc-dns-testing":
		// Debian with dnsutils and a coredns binary at /coredns.
		return [][]image.File{u.busybox, u.bash, u.debian, {{Path: "/coredns", Source: o.coredns, Mode: 0o755}}}, image.Config{Cmd: []string{"sh"}}, ""
	case "nonewprivs":
		return [][]image.File{u.busybox, u.bash, {{Path: "/usr/local/bin/nnp", Source: bin("nnp"), Mode: 0o4755}}}, image.Config{Cmd: []string{"nnp"}}, ""
	case "nonroot":
		return [][]image.File{u.busybox, u.bash}, image.Config{Cmd: []string{"sh"}, User: "1234"}, ""
	case "sample-apiserver":
		return [][]image.File{{{Path: "/sample-apiserver", Source: bin("sample-apiserver"), Mode: 0o755}}},
			image.Config{Entrypoint: []string{"/sample-apiserver"}}, ""
	case "nginx":
		return [][]image.File{u.busybox, u.bash, u.nginx}, image.Config{Cmd: []string{"nginx", "-g", "daemon off;"}}, ""
	}
	return nil, image.Config{}, "not run by the [Conformance] tests"
}

// userland is the lower layers the images share: busybox (upstream's build, its ash the shell, as in
// upstream's busybox and Alpine-based images) with a link per applet in /bin and the users and groups;
// bash; Debian's programs in /usr/bin, which come first on PATH; and Debian's nginx, for the nginx images.
type userland struct{ busybox, bash, debian, nginx []image.File }

func (o options) userland() (userland, error) {
	var u userland
	out, err := exec.Command(o.busybox, "--list").Output()
	if err != nil {
		return u, fmt.Errorf("busybox --list: %w", err)
	}
	u.busybox = []image.File{{Path: "/bin/busybox", Source: o.busybox, Mode: 0o755}}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" && !strings.ContainsAny(applet, "/") {
			u.busybox = append(u.busybox, image.File{Path: "/bin/" + applet, Link: "busybox"})
		}
	}
	u.busybox = append(u.busybox,
		image.File{Path: "/etc/passwd", Data: []byte(passwd)},
		image.File{Path: "/etc/group", Data: []byte(group)},
		image.File{Path: "/etc/nsswitch.conf", Data: []byte("passwd: files\ngroup: files\nhosts: files dns\n")},
		image.File{Path: "/tmp", Dir: true, Mode: 0o1777}, image.File{Path: "/root", Dir: true})
	if u.bash, err = image.Collect(o.rootfs, []string{"/usr/bin/bash"}); err != nil {
		return u, err
	}
	u.bash = append(u.bash, image.File{Path: "/bin/bash", Link: "/usr/bin/bash"})
	if u.debian, err = image.Collect(o.rootfs, debianPrograms); err != nil {
		return u, err
	}
	u.debian = append(u.debian, image.File{Path: "/usr/bin/nc", Link: "nc.openbsd"})
	if u.nginx, err = image.Collect(o.rootfs, []string{"/usr/sbin/nginx", "/etc/nginx/mime.types", "/usr/share/nginx/html"}); err != nil {
		return u, err
	}
	u.nginx = append(u.nginx,
		image.File{Path: "/etc/nginx/nginx.conf", Data: []byte(nginxConf)},
		image.File{Path: "/var/lib/nginx", Dir: true}, image.File{Path: "/var/log/nginx", Dir: true},
		image.File{Path: "/run", Dir: true})
	return u, nil
}

func readList(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			refs = append(refs, l)
		}
	}
	return refs, sc.Err()
}

// splitRef is an image reference's name and tag.
func splitRef(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}
