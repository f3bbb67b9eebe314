package apply

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport/transporttest/conntest"
)

// fake writes an executable script into the fakes' directory (on PATH) as name.
func fake(t *testing.T, log, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(filepath.Dir(log), name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// What a host lacks is one entry per missing thing; a host that has everything lacks nothing.
func TestRestoreCheck(t *testing.T) {
	ctx := context.Background()
	conn := conntest.Connect(t)
	dir := t.TempDir()
	p := scripts.RestoreCheckParams{Etcdutl: filepath.Join(dir, "etcdutl"), Manifest: filepath.Join(dir, "etcd.yaml"), Held: filepath.Join(dir, "held", "etcd.yaml")}
	lacks, err := restoreCheck(ctx, conn, p)
	if err != nil || len(lacks) != 2 || !strings.HasPrefix(lacks[0], "no etcdutl at ") || !strings.HasPrefix(lacks[1], "no etcd manifest (") {
		t.Fatalf("lacks %q, %v", lacks, err)
	}
	for _, f := range []string{p.Etcdutl, p.Manifest} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if lacks, err := restoreCheck(ctx, conn, p); err != nil || len(lacks) != 0 {
		t.Errorf("lacks %q, %v", lacks, err)
	}
	p.Unit = filepath.Join(dir, "etcd.service")
	if lacks, err := restoreCheck(ctx, conn, p); err != nil || len(lacks) != 1 || !strings.Contains(lacks[0], "not an etcd host") {
		t.Errorf("external member: lacks %q, %v", lacks, err)
	}
}

// An external member's unit is stopped only when running and started only when stopped, each saying so.
func TestHoldEtcdUnit(t *testing.T) {
	ctx := context.Background()
	for _, active := range []bool{true, false} {
		log := fakes(t, active)
		conn := conntest.Connect(t)
		held, err := HoldEtcdUnit(ctx, conn)
		if err != nil || held != active || strings.Contains(calls(t, log), "|stop|etcd|") != active {
			t.Errorf("active %v: held %v, %v:\n%s", active, held, err, calls(t, log))
		}
		released, err := ReleaseEtcdUnit(ctx, conn)
		if err != nil || released == active || strings.Contains(calls(t, log), "|start|--no-block|etcd|") == active {
			t.Errorf("active %v: released %v, %v:\n%s", active, released, err, calls(t, log))
		}
	}
}

// Holding moves the manifests aside and waits for their programs to stop; releasing etcd and then the rest
// puts each back; a second hold or release finds nothing to do.
func TestHoldAndRelease(t *testing.T) {
	ctx := context.Background()
	log := fakes(t, true)
	pgrep := filepath.Join(t.TempDir(), "running")
	fake(t, log, "pgrep", `[ -e `+pgrep+` ] && { echo 42 etcd; exit 0; }; exit 1`)
	conn := conntest.Connect(t)
	dir := t.TempDir()
	manifests, hold := filepath.Join(dir, "manifests"), filepath.Join(dir, "held")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	all := []string{"etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"}
	for _, f := range all {
		if err := os.WriteFile(filepath.Join(manifests, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list := func(d string) []string {
		entries, _ := os.ReadDir(d)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	for i, want := range []bool{true, false} {
		held, err := holdControlPlane(ctx, conn, hold, manifests, 3)
		if err != nil || held != want || !slices.Equal(list(hold), all) || len(list(manifests)) != 0 {
			t.Fatalf("hold %d: %v %v; held %v, left %v", i, held, err, list(hold), list(manifests))
		}
	}
	if fi, err := os.Stat(hold); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("hold directory: %v %v", fi, err)
	}
	// A program still running after the manifests left fails the hold, naming it.
	if err := os.WriteFile(pgrep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := holdControlPlane(ctx, conn, hold, manifests, 2); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("a program that does not stop: %v", err)
	}
	for i, want := range []bool{true, false} {
		released, err := release(ctx, conn, hold, manifests, "etcd")
		if err != nil || released != want || !slices.Equal(list(manifests), all[:1]) {
			t.Fatalf("release etcd %d: %v %v; manifests %v", i, released, err, list(manifests))
		}
	}
	released, err := release(ctx, conn, hold, manifests, "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	if err != nil || !released || !slices.Equal(list(manifests), all) {
		t.Fatalf("release the rest: %v %v; manifests %v", released, err, list(manifests))
	}
	if _, err := os.Stat(hold); err == nil {
		t.Error("the empty hold directory is still there")
	}
}

// A member is restored into a new data directory that replaces the old, kept beside it; etcdutl gets each
// value as one argument, and a failing etcdutl leaves the old data in place and says why.
func TestRestoreMember(t *testing.T) {
	ctx := context.Background()
	log := fakes(t, true)
	fake(t, log, "pgrep", "exit 1")
	dir := t.TempDir()
	etcdutl := filepath.Join(dir, "etcdutl")
	// The fake records its arguments and makes the --data-dir directory, or fails for a snapshot named bad.
	script := "#!/bin/sh\nprintf '%s|' \"$@\" >>" + log + "; echo >>" + log + "\n" +
		`case "$3" in *bad*) echo "snapshot file has wrong CRC" >&2; exit 1;; esac
while [ $# -gt 0 ]; do [ "$1" = --data-dir ] && { mkdir -p "$2/member"; echo new >"$2/member/db"; }; shift; done`
	if err := os.WriteFile(etcdutl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	conn := conntest.Connect(t)
	data := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(filepath.Join(data, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "member", "db"), []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := scripts.EtcdRestoreParams{Snapshot: filepath.Join(dir, "bad.db"), Name: "cp1", PeerURL: "https://10.0.0.11:2380",
		InitialCluster: "cp1=https://10.0.0.11:2380", Token: "t'$(id)'", Bump: 1000, Etcdutl: etcdutl, DataDir: data}
	if err := RestoreMember(ctx, conn, p); err == nil || !strings.Contains(err.Error(), "wrong CRC") {
		t.Fatalf("a bad snapshot: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(data, "member", "db")); string(got) != "old\n" {
		t.Fatalf("a failed restore changed the data: %q", got)
	}
	p.Snapshot = filepath.Join(dir, "snap.db")
	if err := os.WriteFile(p.Snapshot, []byte("snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RestoreMember(ctx, conn, p); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{filepath.Join(data, "member", "db"): "new\n", filepath.Join(data+".before-restore", "member", "db"): "old\n"} {
		if got, err := os.ReadFile(f); string(got) != want {
			t.Errorf("%s: %q %v", f, got, err)
		}
	}
	if _, err := os.Stat(p.Snapshot); err == nil {
		t.Error("the snapshot is still there")
	}
	if !strings.Contains(calls(t, log), "|--initial-cluster-token|t'$(id)'|") {
		t.Errorf("etcdutl's arguments:\n%s", calls(t, log))
	}
}
