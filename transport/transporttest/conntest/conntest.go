// Package conntest connects a transport.Conn to an in-process SSH server (transporttest), for tests of
// tasks that work on a host: their commands run on this machine with sh, their files are this machine's.
package conntest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/clusterctl/clusterctl/transport"
	"github.com/clusterctl/clusterctl/transport/transporttest"
)

// Setup starts a server that accepts the returned target's key, with options whose known_hosts trusts it.
func Setup(t testing.TB, opts transporttest.Options) (*transporttest.Server, transport.Target, transport.Options) {
	t.Helper()
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKeys = append(opts.AuthorizedKeys, signer.PublicKey())
	srv := transporttest.NewServer(t, opts)
	kh := filepath.Join(dir, "known_hosts")
	srv.WriteKnownHosts(t, kh, srv.HostKey.PublicKey())
	host, port, _ := net.SplitHostPort(srv.Addr)
	p, _ := strconv.Atoi(port)
	target := transport.Target{Name: "h1", Address: host, Port: p, User: "root", IdentityFiles: []string{keyFile}}
	return srv, target, transport.Options{ClusterKnownHosts: kh, KnownHosts: []string{}, SSHConfig: "none",
		ConnectTimeout: 2 * time.Second, RetryDelay: 10 * time.Millisecond, Retries: 2, RecordFile: filepath.Join(dir, "pushed")}
}

// Connect starts a server and returns a connection to it, closed when the test ends.
func Connect(t testing.TB) *transport.Conn {
	t.Helper()
	_, target, opts := Setup(t, transporttest.Options{})
	d, err := transport.NewDialer(opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
