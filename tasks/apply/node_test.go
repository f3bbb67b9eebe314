package apply

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/transport/transporttest/conntest"
)

// Files are removed whatever their names hold (one argument each: a split name would not be removed), and the result says whether any was there.
func TestRemoveFiles(t *testing.T) {
	ctx := context.Background()
	conn := conntest.Connect(t)
	dir := t.TempDir()
	odd := filepath.Join(dir, "a b; rm -rf x '$(id)'")
	if err := os.WriteFile(odd, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		removed, err := RemoveFiles(ctx, conn, odd, filepath.Join(dir, "absent"))
		if err != nil || removed != want {
			t.Fatalf("run %d: removed %v, %v; want %v", i, removed, err, want)
		}
	}
	if _, err := os.Stat(odd); err == nil {
		t.Error("the file is still there")
	}
}

// A certificate is read without its key; no file is no certificate and no error.
func TestReadCert(t *testing.T) {
	ctx := context.Background()
	conn := conntest.Connect(t)
	ca, err := (&pki.Issuer{Algorithm: "ECDSA-P256"}).NewCA(pki.CAs()[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.EncodeKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pair.pem")
	if err := os.WriteFile(file, append(pki.EncodeCert(ca.Cert), key...), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCert(ctx, conn, file)
	if err != nil || got == nil || !got.Equal(ca.Cert) {
		t.Fatalf("ReadCert: %v %v", got, err)
	}
	if got, err := ReadCert(ctx, conn, file+".absent"); got != nil || err != nil {
		t.Errorf("no file: %v %v", got, err)
	}
}

// Renewing the serving certificate removes the pair and restarts the kubelet, saying when by the host's
// clock.
func TestRenewServing(t *testing.T) {
	log := fakes(t, true)
	conn := conntest.Connect(t)
	file := filepath.Join(t.TempDir(), "kubelet-server-current.pem")
	if err := os.WriteFile(file, []byte("pair"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Second)
	started, err := renewServing(context.Background(), conn, file)
	if err != nil {
		t.Fatal(err)
	}
	if started.Before(before) || started.After(time.Now()) {
		t.Errorf("started %s, not the host's clock before the restart (%s)", started, before)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("the serving pair is still there")
	}
	if got := calls(t, log); got != "systemctl|restart|kubelet|\n" {
		t.Errorf("calls:\n%s", got)
	}
}

// The Pods with a token another key signed are found from the token files' headers, for running Pods only.
func TestOldPodTokens(t *testing.T) {
	conn := conntest.Connect(t)
	pods := t.TempDir()
	token := func(uid, kid string) {
		dir := filepath.Join(pods, uid, "volumes", "kubernetes.io~projected", "kube-api-access-x")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"` + kid + `"}`))
		if err := os.WriteFile(filepath.Join(dir, "token"), []byte(header+".claims.signature"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	token("u1", "new")
	token("u2", "old")
	token("u3", "old")
	running := map[string]string{"u1": "app/a", "u2": "app/b"}
	got, err := oldPodTokens(context.Background(), conn, pods, running, "new")
	if err != nil || !slices.Equal(got, []string{"app/b"}) {
		t.Errorf("old tokens %v %v", got, err)
	}
}

// The node's state names the kubelet's; a host that cannot run the script says so instead of failing.
func TestNodeState(t *testing.T) {
	log := fakes(t, true)
	conn := conntest.Connect(t)
	if got := NodeState(context.Background(), conn); !strings.HasPrefix(got, "kubelet ") || !strings.Contains(got, "pods:") {
		t.Errorf("state %q", got)
	}
	if got := calls(t, log); !strings.Contains(got, "systemctl|is-active|kubelet|") {
		t.Errorf("calls:\n%s", got)
	}
	conn.Close()
	if got := NodeState(context.Background(), conn); !strings.HasPrefix(got, "cannot read the node's state: ") {
		t.Errorf("closed connection: %q", got)
	}
}
