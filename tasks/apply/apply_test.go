package apply

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
	"github.com/clusterctl/clusterctl/transport/transporttest/conntest"
)

// fakes puts recording fakes of the commands the scripts run first on PATH (the in-process SSH server's
// commands inherit it) and returns the log they write: one line per call, arguments separated by |.
func fakes(t *testing.T, active bool) string {
	bin := t.TempDir()
	log := filepath.Join(bin, "log")
	rec := "#!/bin/sh\nprintf '%s|' \"$(basename \"$0\")\" \"$@\" >>" + log + "; echo >>" + log + "\n"
	for _, name := range []string{"ctr", "modprobe", "sysctl"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(rec), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state := "exit 0"
	if !active {
		state = `case "$1" in is-active|is-enabled) exit 3;; esac; exit 0`
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(rec+state+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return log
}

func calls(t *testing.T, log string) string {
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// A dry run finds what a real run then does, and changes nothing; a second real run does nothing. Image
// names and archive paths reach ctr as one argument each, whatever they hold.
func TestPushDryThenReal(t *testing.T) {
	ctx := context.Background()
	log := fakes(t, false)
	conn := conntest.Connect(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "pause.tar; touch "+filepath.Join(dir, "pwned"))
	n := Node{
		Mark:   transport.File{Path: filepath.Join(dir, "mark"), Data: []byte("cluster=x\n"), Mode: 0o644},
		Files:  []transport.File{{Path: archive, Data: []byte("tar"), Mode: 0o644}, {Path: filepath.Join(dir, "kubelet.yaml"), Data: []byte("k"), Mode: 0o644}},
		Images: []scripts.Image{{File: archive, Ref: "registry.k8s.io/pause:3.10'$(id)'"}},
		Stamps: filepath.Join(dir, "stamps"),
		Dry:    true,
	}
	dry, err := Push(ctx, conn, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Files) != 3 || !slices.Contains(dry.Actions, "import image registry.k8s.io/pause:3.10'$(id)'") || !slices.Contains(dry.Actions, "start containerd") {
		t.Errorf("dry run: %+v", dry)
	}
	if got := calls(t, log); strings.Contains(got, "|import|") || strings.Contains(got, "|enable|") || strings.Contains(got, "modprobe") {
		t.Errorf("a dry run ran commands that change the host:\n%s", got)
	}
	if _, err := os.Stat(n.Mark.Path); err == nil {
		t.Error("a dry run wrote a file")
	}

	n.Dry = false
	real, err := Push(ctx, conn, n)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(real.Actions, dry.Actions) || len(real.Files) != len(dry.Files) {
		t.Errorf("the real run did\n%+v\nthe dry run said\n%+v", real, dry)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("an archive path ran a command")
	}
	if got := calls(t, log); !strings.Contains(got, "ctr|-n|k8s.io|images|import|"+archive+"|") {
		t.Errorf("ctr did not get the archive as one argument:\n%s", got)
	}

	// Nothing new: files, kernel settings and units stay; only what the fakes report as not running is
	// started again.
	again, err := Push(ctx, conn, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Files) != 0 || slices.ContainsFunc(again.Actions, func(a string) bool { return strings.HasPrefix(a, "apply") || strings.HasPrefix(a, "load") }) {
		t.Errorf("a re-run changed %+v", again)
	}
}

// The kubelet restarts when its inputs changed since it last started, or when told to; a running kubelet
// with nothing new is left alone.
func TestKubelet(t *testing.T) {
	ctx := context.Background()
	fakes(t, true)
	conn := conntest.Connect(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := scripts.KubeletParams{Inputs: []string{cfg}, Stamps: filepath.Join(dir, "stamps")}
	for i, want := range []string{"restart kubelet", "", "restart kubelet"} {
		if i == 2 {
			if err := os.WriteFile(cfg, []byte("b"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := Kubelet(ctx, conn, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(out.Actions, ","); got != want {
			t.Errorf("run %d: %q, want %q", i, got, want)
		}
		// A restart says when, by the host's clock; leaving the kubelet alone says nothing.
		if restarted := want != ""; restarted == out.Started.IsZero() || restarted && time.Since(out.Started) > time.Minute {
			t.Errorf("run %d: started %v", i, out.Started)
		}
	}
	p.Restart = true
	if out, err := Kubelet(ctx, conn, p); err != nil || len(out.Actions) != 1 {
		t.Errorf("told to restart: %+v %v", out, err)
	}
}

func TestMayPreexist(t *testing.T) {
	for p, want := range map[string]bool{"/etc/containerd/config.toml": true, "/usr/local/bin/kubelet": true,
		"/etc/kubernetes/admin.conf": false, "/var/lib/clusterctl/images/x.tar": false, "/etc/systemd/system/clusterctl-pod-routes.service": false} {
		if MayPreexist(p) != want {
			t.Errorf("%s: %v", p, !want)
		}
	}
}

// The routes unit restarts when its routes or unit changed, and only then; systemd is reloaded only when it
// says the unit on disk is not the one it runs (not loaded, or NeedDaemonReload).
func TestRoutes(t *testing.T) {
	ctx := context.Background()
	log := fakes(t, true)
	conn := conntest.Connect(t)
	dir := t.TempDir()
	// systemctl show answers "Key=value" from $dir/show.LoadState and $dir/show.NeedDaemonReload, and that
	// the unit is enabled.
	show := `case "$1" in show) for k in LoadState NeedDaemonReload; do printf '%s=' $k; cat "` + dir + `/show.$k" 2>/dev/null; done; echo UnitFileState=enabled;; esac; exit 0`
	bin := filepath.Dir(log)
	rec, err := os.ReadFile(filepath.Join(bin, "systemctl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(strings.Replace(string(rec), "exit 0\n", show+"\n", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	state := func(load, need string) {
		for k, v := range map[string]string{"LoadState": load, "NeedDaemonReload": need} {
			if err := os.WriteFile(filepath.Join(dir, "show."+k), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	unitPath, routesPath := filepath.Join(dir, "routes.service"), filepath.Join(dir, "routes")
	u := RoutesUnit{Routes: scripts.RoutesParams{Inputs: []string{unitPath, routesPath}, RoutesFile: routesPath, Name: "clusterctl-pod-routes.service",
		StampsDir: filepath.Join(dir, "stamps")}}
	for i, c := range []struct {
		unit, routes, load, need string
		restart, reload          bool
	}{
		{"u", "a", "loaded", "no", true, false},     // the unit came with the node's files: new routes, no reload
		{"u", "a", "loaded", "no", false, false},    // nothing new
		{"u", "b", "loaded", "no", true, false},     // new routes
		{"u2", "b", "loaded", "yes", true, true},    // a unit systemd runs an older version of
		{"u2", "b", "not-found", "no", false, true}, // one systemd never loaded
	} {
		state(c.load, c.need)
		before := calls(t, log)
		u.Files = []transport.File{{Path: unitPath, Data: []byte(c.unit), Mode: 0o644}, {Path: routesPath, Data: []byte(c.routes), Mode: 0o644}}
		out, err := Routes(ctx, conn, u)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimPrefix(calls(t, log), before)
		if restarted := slices.Equal(out.Actions, []string{"restart the pod routes"}); restarted != c.restart || strings.Contains(got, "|restart|") != c.restart {
			t.Errorf("run %d: restart %v, want %v: %+v\n%s", i, restarted, c.restart, out, got)
		}
		if reloaded := strings.Contains(got, "systemctl|daemon-reload|"); reloaded != c.reload {
			t.Errorf("run %d: daemon-reload %v, want %v:\n%s", i, reloaded, c.reload, got)
		}
		if strings.Contains(got, "|enable|") && !strings.Contains(got, "|enable|--no-reload|") {
			t.Errorf("run %d: enable reloads systemd:\n%s", i, got)
		}
		// The stamp (taken from prestale's digests) is the one stale alone writes, and earlier runs wrote:
		// the sha256 of a "FILE SHA256  -" line per file.
		var lines string
		for _, f := range u.Files {
			lines += fmt.Sprintf("%s %x  -\n", f.Path, sha256.Sum256(f.Data))
		}
		if stamp, _ := os.ReadFile(filepath.Join(dir, "stamps", "routes")); strings.TrimSpace(string(stamp)) != fmt.Sprintf("%x", sha256.Sum256([]byte(lines))) {
			t.Errorf("run %d: stamp %q, want the sha256 of\n%s", i, stamp, lines)
		}
	}
}

// A worker's kubelet.conf is pointed at the endpoint and CA data whole, its other content kept; one not
// written yet (a worker not joined) is left to the kubelet.
func TestRepoint(t *testing.T) {
	ctx := context.Background()
	conn := conntest.Connect(t)
	file := filepath.Join(t.TempDir(), "kubelet.conf")
	if out, err := Repoint(ctx, conn, file, "https://127.0.0.1:7443", []byte("CA"), false); err != nil || out.Changed() {
		t.Fatalf("no file: %+v %v", out, err)
	}
	conf := `apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://[fd00::10]:6443", certificate-authority-data: T0xE}
  name: default-cluster
contexts:
- context: {cluster: default-cluster, user: default-auth}
  name: default-context
current-context: default-context
users:
- name: default-auth
  user: {client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem}
`
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		out, err := Repoint(ctx, conn, file, "https://127.0.0.1:7443", []byte("CA"), false)
		if err != nil || out.Changed() != want {
			t.Fatalf("run %d: %+v %v", i, out, err)
		}
	}
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), "server: https://127.0.0.1:7443") || !strings.Contains(string(data), "kubelet-client-current.pem") {
		t.Errorf("kubelet.conf:\n%s", data)
	}
}

// Archives are imported side by side; one import failing fails the push, after the others finished.
func TestPushImportFails(t *testing.T) {
	log := fakes(t, true)
	bin := filepath.Dir(log)
	ctr := "#!/bin/sh\ncase \"$*\" in *bad.tar*) echo \"ctr: bad.tar: unexpected EOF\" >&2; exit 1;; *import*) sleep 0.2; printf '%s|' imported \"$@\" >>" + log + "; echo >>" + log + ";; esac\n"
	if err := os.WriteFile(filepath.Join(bin, "ctr"), []byte(ctr), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []transport.File
	var images []scripts.Image
	for _, name := range []string{"a.tar", "bad.tar", "c.tar"} {
		files = append(files, transport.File{Path: filepath.Join(dir, name), Data: []byte(name)})
		images = append(images, scripts.Image{File: filepath.Join(dir, name), Ref: "example.org/" + name})
	}
	n := Node{Mark: transport.File{Path: filepath.Join(dir, "mark"), Data: []byte("m")}, Files: files, Images: images, Stamps: filepath.Join(dir, "stamps")}
	_, err := Push(context.Background(), conntest.Connect(t), n)
	if err == nil || !strings.Contains(err.Error(), "bad.tar: unexpected EOF") || !strings.Contains(err.Error(), "importing an image archive failed") {
		t.Fatalf("err = %v", err)
	}
	if got := calls(t, log); strings.Count(got, "imported|") != 2 {
		t.Errorf("the other imports did not finish:\n%s", got)
	}
}

// The setup script keeps the components' versions for the facts script, which then starts none of them
// and writes nothing; a binary replaced is asked again. A dry run asks and writes nothing.
func TestVersionCache(t *testing.T) {
	ctx := context.Background()
	log := fakes(t, true)
	bin := filepath.Dir(log)
	// component installs a fake that prints its version, as the push does: written beside, then renamed.
	component := func(name, version string) {
		script := "#!/bin/sh\nprintf '%s|' \"$(basename \"$0\")\" \"$@\" >>" + log + "; echo >>" + log + "\necho '" + name + " version " + version + "'; echo 'more lines'\n"
		tmp := filepath.Join(bin, name+".tmp")
		if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"kubelet", "containerd", "crictl", "runc"} {
		component(c, "v1")
	}
	conn := conntest.Connect(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "versions")
	n := Node{Mark: transport.File{Path: filepath.Join(dir, "mark"), Data: []byte("m")}, Stamps: filepath.Join(dir, "stamps"), VersionCache: cache}
	asked := func() int { return strings.Count(calls(t, log), "|--version|") }
	push := func(dry bool) {
		t.Helper()
		n.Dry = dry
		if _, err := Push(ctx, conn, n); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		data, err := os.ReadFile(cache)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(data)
	}
	// kubeletVersion is the facts script's version line of the kubelet, checking it reports all four.
	kubeletVersion := func() string {
		t.Helper()
		res, err := conn.Run(ctx, "sh -s", []byte(scripts.Facts(scripts.FactsParams{Socket: filepath.Join(dir, "none.sock"), VersionCache: cache})))
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Stdout)
		if c := strings.Count(out, "\nversion\t"); c != 4 {
			t.Errorf("facts report %d versions:\n%s", c, out)
		}
		_, v, _ := strings.Cut(out, "\nversion\tkubelet ")
		v, _, _ = strings.Cut(v, "\n")
		return v
	}

	push(true)
	if asked() != 0 || read() != "" {
		t.Fatalf("a dry run asked %d versions, wrote %q", asked(), read())
	}
	push(false)
	cached := read()
	if asked() != 4 || strings.Count(cached, "version v1\n") != 4 {
		t.Fatalf("the push asked %d versions and kept:\n%s", asked(), cached)
	}
	if v := kubeletVersion(); v != "kubelet version v1" || asked() != 4 {
		t.Errorf("facts: kubelet %q, %d versions asked in all", v, asked())
	}
	push(false)
	if asked() != 4 || read() != cached {
		t.Errorf("a push with nothing new asked %d versions in all, cache:\n%s", asked(), read())
	}
	component("kubelet", "v2")
	if v := kubeletVersion(); v != "kubelet version v2" || asked() != 5 || read() != cached {
		t.Errorf("facts after the kubelet changed: %q, %d asked, cache:\n%s", v, asked(), read())
	}
	push(false)
	if asked() != 6 || !strings.Contains(read(), "kubelet version v2\n") || strings.Count(read(), "\n") != 4 {
		t.Errorf("the push after the kubelet changed asked %d in all, cache:\n%s", asked(), read())
	}
	if v := kubeletVersion(); v != "kubelet version v2" || asked() != 6 {
		t.Errorf("facts: %q, %d asked", v, asked())
	}
}
