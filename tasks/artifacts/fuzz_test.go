package artifacts

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds the manifest parser arbitrary JSON: it must never panic, and what it accepts names only
// files inside the directory, with names that are file names.
//
//	go test ./tasks/artifacts -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"kubernetesVersion":"v1.37.2","files":[{"path":"bin/linux-amd64/kubelet","sha256":"` + strings.Repeat("a", 64) + `","size":1,"kind":"binary","name":"kubelet","arch":"amd64"}]}`))
	f.Add([]byte(`{"files":[{"path":"../x","sha256":"","kind":"binary","name":"../../etc/cron.d/x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		for _, file := range m.Files {
			if !filepath.IsLocal(filepath.FromSlash(file.Path)) || strings.ContainsAny(file.Name, "/\\") || file.Name == "" {
				t.Fatalf("accepted %+v", file)
			}
		}
		_ = m.Find(KindBinary, "kubelet", "amd64")
	})
}

// A manifest that would read outside its directory, or write outside the binaries' directory on hosts, is
// refused, each problem named.
func TestParseRefusesHostileEntries(t *testing.T) {
	sum := strings.Repeat("0", 64)
	_, err := Parse([]byte(`{"files":[
	  {"path":"../../etc/shadow","sha256":"` + sum + `","kind":"binary","name":"kubelet","arch":"amd64"},
	  {"path":"bin/x","sha256":"` + sum + `","kind":"binary","name":"../../etc/cron.d/x","arch":"amd64"},
	  {"path":"bin/y","sha256":"` + sum + `","kind":"script","name":"y","arch":"amd64"},
	  {"path":"bin/z","sha256":"nope","kind":"binary","name":"z","arch":"amd64"}]}`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"files[0].path", "files[1].name", "files[2].kind", "files[3].sha256"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}
