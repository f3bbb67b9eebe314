package facts

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/scripts"
)

// The stamp as stamp.sh writes it, read back by the facts script and ParseFacts: the host is settled for
// the stamp's digest while its files stay as they were, and not once one is touched or removed.
// (The state is hashed by sha256sum on the host when stamped and by ParseFacts when read.)
func TestStampRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, b, gone, st := filepath.Join(dir, "a b.conf"), filepath.Join(dir, "b"), filepath.Join(dir, "gone"), filepath.Join(dir, "stamp")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(script string) []byte { return runScript(t, script, "stat", "sha256sum") }
	run(scripts.Stamp(scripts.StampParams{Path: st, Digest: "abc", Paths: []string{a, b, gone}}))
	unsettled := func() string {
		t.Helper()
		f, err := ParseFacts("cp1", run(scripts.Facts(scripts.FactsParams{Stamp: st})))
		if err != nil {
			t.Fatal(err)
		}
		return f.Unsettled("abc")
	}
	if got := unsettled(); got != "" {
		t.Fatalf("just stamped: %q", got)
	}
	if err := os.Chtimes(b, time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := unsettled(); got != "a file its stamp lists changed since" {
		t.Errorf("a file touched: %q", got)
	}
	// Stamped again as it is now, then one of its files removed.
	run(scripts.Stamp(scripts.StampParams{Path: st, Digest: "abc", Paths: []string{a, b, gone}}))
	if got := unsettled(); got != "" {
		t.Fatalf("stamped again: %q", got)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if got := unsettled(); got != "a file its stamp lists changed since" {
		t.Errorf("a file removed: %q", got)
	}
}
