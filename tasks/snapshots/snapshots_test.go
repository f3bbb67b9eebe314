package snapshots

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
)

// The units run the script with the directory and count as two arguments, quoted as systemd reads them,
// on the schedule given.
func TestFiles(t *testing.T) {
	files, err := Files(&inventory.EtcdSnapshots{Schedule: "Mon..Fri 02:30", Keep: 7, Dir: "/srv/etcd-snapshots"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	byPath := map[string]string{}
	for _, f := range files {
		paths = append(paths, f.Path)
		byPath[f.Path] = string(f.Data)
	}
	if !slices.Equal(paths, Paths) {
		t.Errorf("paths %v, want %v", paths, Paths)
	}
	if !strings.Contains(byPath[ServicePath], "\nExecStart="+Script+" /srv/etcd-snapshots 7\n") {
		t.Errorf("service:\n%s", byPath[ServicePath])
	}
	if !strings.Contains(byPath[TimerPath], "\nOnCalendar=Mon..Fri 02:30\nPersistent=true\n") {
		t.Errorf("timer:\n%s", byPath[TimerPath])
	}
}

// The script, with stand-ins for etcdctl and etcdutl, writes a verified snapshot 0600 in a 0700
// directory it makes, keeps the newest KEEP, leaves other files alone, and writes nothing into a directory
// that others may read.
func TestScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the script checks that the directory is root's: run as root")
	}
	bin := t.TempDir()
	// etcdctl: "endpoint health" succeeds; "snapshot save FILE" writes FILE. etcdutl: a status line, or
	// failure for a file named bad.
	write := func(name, body string) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	etcdctl := write("etcdctl", `for a; do last=$a; done
case "$*" in *"snapshot save"*) echo data > "$last";; esac
`)
	etcdutl := write("etcdutl", `echo '1234abcd, 42, 7, 20 kB, 3.7.0'
`)
	data, err := scriptFor(bin, etcdctl, etcdutl)
	if err != nil {
		t.Fatal(err)
	}
	script := write("etcd-snapshot", strings.TrimPrefix(string(data), "#!/bin/sh\n"))
	dir := filepath.Join(t.TempDir(), "snapshots")
	old := []string{"etcd-snapshot-20260101T000000Z.db", "etcd-snapshot-20260102T000000Z.db", "etcd-snapshot-20260103T000000Z.db"}
	run := func() string {
		out, err := exec.Command(script, dir, "2").CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return string(out)
	}
	out := run() // makes the directory
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v, %v", st, err)
	}
	for _, n := range old {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // names are to the second
	out += run()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if info, _ := e.Info(); NameRE.MatchString(e.Name()) && info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", e.Name(), info.Mode().Perm())
		}
	}
	// the newest two kept: the run's own (named by the time now) and the first run's; the three older gone
	if len(names) != 3 || names[2] != "notes.txt" || !NameRE.MatchString(names[0]) || !NameRE.MatchString(names[1]) || slices.Contains(names, old[2]) {
		t.Errorf("left in the directory: %v\n%s", names, out)
	}
	if !strings.Contains(out, "hash, revision, keys, size, version: 1234abcd, 42, 7, 20 kB, 3.7.0)") || !strings.Contains(out, "removed "+filepath.Join(dir, old[0])) {
		t.Errorf("output:\n%s", out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script, dir, "2").CombinedOutput(); err == nil || !strings.Contains(string(out), "mode 0700") {
		t.Errorf("a directory others may read: %v\n%s", err, out)
	}
}
