package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/clusterctl/clusterctl/transport/transporttest"
)

// With --ssh-accept-new, the first key a host offers in a run is recorded; a different key offered on a
// later handshake of the same run (a dial retry, a second connection) is a mismatch, never recorded.
func TestAcceptNewRefusesAKeyChangedWithinARun(t *testing.T) {
	own := filepath.Join(t.TempDir(), "known_hosts")
	hk, err := newHostKeys(own, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	cb := hk.callback("h1", nil)
	remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 22}
	first, second := transporttest.NewKey(t).PublicKey(), transporttest.NewKey(t).PublicKey()
	if err := cb("10.0.0.1:22", remote, first); err != nil {
		t.Fatalf("first key of a new host: %v", err)
	}
	if err := cb("10.0.0.1:22", remote, first); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	err = cb("10.0.0.1:22", remote, second)
	var he *HostKeyError
	if !errors.As(err, &he) || he.Unknown || he.Offered != describeKey(second) ||
		len(he.Expected) != 1 || !strings.Contains(he.Expected[0], ssh.FingerprintSHA256(first)) {
		t.Fatalf("a changed key within the run: got %v, want a mismatch naming the first key", err)
	}
	if Retryable(err) {
		t.Error("the mismatch is retryable")
	}
	data, _ := os.ReadFile(own)
	if n := strings.Count(string(data), "\n"); n != 1 || strings.Contains(string(data), string(ssh.MarshalAuthorizedKey(second))[:40]) {
		t.Errorf("known_hosts holds %d lines (want only the first key):\n%s", n, data)
	}
}

// The key types asked of a host are those known_hosts holds for it, under its plain or hashed name.
func TestAlgorithmsFromKnownHosts(t *testing.T) {
	ed := transporttest.NewKey(t).PublicKey()
	file := filepath.Join(t.TempDir(), "known_hosts")
	lines := []string{
		knownhosts.Line([]string{"10.0.0.1"}, ed),
		knownhosts.Line([]string{knownhosts.HashHostname("10.0.0.2")}, ed),
		knownhosts.Line([]string{"[10.0.0.3]:2222"}, ed),
		"@revoked 10.0.0.4 " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ed))),
		"# a comment",
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hk, err := newHostKeys(file, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"10.0.0.1:22": ssh.KeyAlgoED25519, "10.0.0.2:22": ssh.KeyAlgoED25519, "10.0.0.3:2222": ssh.KeyAlgoED25519,
		"10.0.0.3:22": "", "10.0.0.4:22": "", "10.0.0.9:22": "",
	} {
		if got := strings.Join(hk.algorithms(addr), ","); got != want {
			t.Errorf("algorithms(%s) = %q, want %q", addr, got, want)
		}
	}
}

// BenchmarkAlgorithms1000 looks up one host's key types in a known_hosts of 1,000 hosts, as each connection
// of a fan-out does.
func BenchmarkAlgorithms1000(b *testing.B) {
	ed := transporttest.NewKey(b).PublicKey()
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(knownhosts.Line([]string{net.JoinHostPort(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), "22")}, ed) + "\n")
	}
	file := filepath.Join(b.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	hk, err := newHostKeys(file, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if len(hk.algorithms("10.1.3.250:22")) != 1 {
			b.Fatal("host not found")
		}
	}
}

// With RecordTrusted (state pull), a key the other known_hosts files trust is recorded in the cluster's
// own, once; an unknown key is still refused and not recorded.
func TestRecordTrusted(t *testing.T) {
	dir := t.TempDir()
	own, other := filepath.Join(dir, "own"), filepath.Join(dir, "other")
	key, stranger := transporttest.NewKey(t).PublicKey(), transporttest.NewKey(t).PublicKey()
	if err := os.WriteFile(other, []byte(knownhosts.Line([]string{"10.0.0.1"}, key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hk, err := newHostKeys(own, []string{other}, false)
	if err != nil {
		t.Fatal(err)
	}
	hk.recordTrusted = true
	remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 22}
	for range 2 {
		if err := hk.callback("h1", nil)("10.0.0.1:22", remote, key); err != nil {
			t.Fatalf("a trusted key: %v", err)
		}
	}
	if err := hk.callback("h2", nil)("10.0.0.2:22", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 22}, stranger); err == nil {
		t.Error("an unknown key accepted")
	}
	data, _ := os.ReadFile(own)
	if want := knownhosts.Line([]string{"10.0.0.1"}, key) + "\n"; string(data) != want {
		t.Errorf("own known_hosts:\n%s\nwant:\n%s", data, want)
	}
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("own known_hosts: %v, %v", fi.Mode(), err)
	}
}
