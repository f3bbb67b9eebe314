package transport

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

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
	cb := hk.callback("h1", "")
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
	if !errors.As(err, &he) || he.Unknown || he.Offered != ssh.FingerprintSHA256(second) ||
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
