package transport_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/clusterctl/clusterctl/transport"
	"github.com/clusterctl/clusterctl/transport/transporttest"
	"github.com/clusterctl/clusterctl/transport/transporttest/conntest"
)

// setup starts a server that accepts the returned client key, with a known_hosts file that trusts it.
func setupB(b *testing.B) (*transporttest.Server, transport.Target, transport.Options) {
	return setup(b, transporttest.Options{})
}

func setup(t testing.TB, opts transporttest.Options) (*transporttest.Server, transport.Target, transport.Options) {
	t.Helper()
	return conntest.Setup(t, opts)
}

func dial(t *testing.T, target transport.Target, opts transport.Options) (*transport.Conn, error) {
	t.Helper()
	d, err := transport.NewDialer(opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(context.Background(), target)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestRunOutputsAndErrors(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(context.Background(), "echo out; echo err >&2; cat", []byte("in\n"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\nin\n" || string(res.Stderr) != "err\n" {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	_, err = c.Run(context.Background(), "echo oops >&2; exit 3", nil)
	var ce *transport.CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 3 || strings.TrimSpace(ce.Stderr) != "oops" || ce.Host != "h1" || ce.Command != "echo oops >&2; exit 3" {
		t.Fatalf("got %#v", err)
	}
	if !strings.Contains(err.Error(), `h1: command "echo oops >&2; exit 3" failed: exit status 3: oops`) {
		t.Errorf("message: %v", err)
	}
	// stdout and stderr never mix, even when both are busy at once.
	res, err = c.Run(context.Background(), "for i in $(seq 2000); do echo o$i; echo e$i >&2; done", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(res.Stdout), "o") != 2000 || strings.Contains(string(res.Stdout), "e") ||
		strings.Count(string(res.Stderr), "e") != 2000 {
		t.Errorf("outputs mixed or lost: %d bytes out, %d bytes err", len(res.Stdout), len(res.Stderr))
	}
}

func TestHostKeyMismatchIsFinal(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	// known_hosts holds another key for the server's address.
	srv.WriteKnownHosts(t, opts.ClusterKnownHosts, transporttest.NewKey(t).PublicKey())
	_, err := dial(t, target, opts)
	var hk *transport.HostKeyError
	if !errors.As(err, &hk) || hk.Unknown {
		t.Fatalf("got %v, want a host key mismatch", err)
	}
	offered := ssh.FingerprintSHA256(srv.HostKey.PublicKey()) + " (ED25519)"
	if hk.Host != "h1" || hk.Offered != offered || len(hk.Expected) != 1 || !strings.Contains(hk.Expected[0], opts.ClusterKnownHosts+":1") {
		t.Errorf("error does not name the host, the offered and the expected key: %v", hk)
	}
	if !strings.Contains(err.Error(), "ssh-keygen -R") {
		t.Errorf("no way forward in %q", err)
	}
	if n := srv.Connections(); n != 1 {
		t.Errorf("a host key mismatch was retried: %d connections", n)
	}
	if transport.Retryable(err) {
		t.Error("Retryable(host key mismatch) = true")
	}
}

func TestUnknownHostKey(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	os.Remove(opts.ClusterKnownHosts)
	_, err := dial(t, target, opts)
	var hk *transport.HostKeyError
	if !errors.As(err, &hk) || !hk.Unknown || !strings.Contains(err.Error(), "--ssh-accept-new") {
		t.Fatalf("got %v, want an unknown host key error", err)
	}

	// With AcceptNew the key is recorded in the cluster's known_hosts, and trusted from then on.
	opts.AcceptNew = true
	if _, err := dial(t, target, opts); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(opts.ClusterKnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.HostKey.PublicKey())))) {
		t.Errorf("key not recorded: %s", data)
	}
	if st, _ := os.Stat(opts.ClusterKnownHosts); st.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v, want 0600", st.Mode().Perm())
	}
	opts.AcceptNew = false
	if _, err := dial(t, target, opts); err != nil {
		t.Fatalf("recorded key not trusted: %v", err)
	}

	// AcceptNew never accepts a changed key.
	srv2 := transporttest.NewServer(t, transporttest.Options{AuthorizedKeys: nil})
	_, port, _ := net.SplitHostPort(srv2.Addr)
	lines := strings.Replace(string(data), strconv.Itoa(target.Port), port, 1)
	if err := os.WriteFile(opts.ClusterKnownHosts, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	target.Port, _ = strconv.Atoi(port)
	opts.AcceptNew = true
	if _, err := dial(t, target, opts); !errors.As(err, &hk) || hk.Unknown {
		t.Fatalf("AcceptNew with a changed key: %v", err)
	}
}

func TestPinnedAndHashedAndCAHostKeys(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	os.Remove(opts.ClusterKnownHosts)

	pinned := target
	pinned.HostKeys = []string{ssh.FingerprintSHA256(srv.HostKey.PublicKey())}
	if _, err := dial(t, pinned, opts); err != nil {
		t.Fatalf("pinned key: %v", err)
	}
	pinned.HostKeys = []string{ssh.FingerprintSHA256(transporttest.NewKey(t).PublicKey())}
	var hk *transport.HostKeyError
	if _, err := dial(t, pinned, opts); !errors.As(err, &hk) || !strings.Contains(err.Error(), "pinned in the inventory") {
		t.Fatalf("wrong pinned key: %v", err)
	}

	// A hashed known_hosts entry.
	addr := knownhosts.Normalize(srv.Addr)
	hashed := knownhosts.Line([]string{knownhosts.HashHostname(addr)}, srv.HostKey.PublicKey())
	if err := os.WriteFile(opts.ClusterKnownHosts, []byte(hashed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, target, opts); err != nil {
		t.Fatalf("hashed known_hosts entry: %v", err)
	}

	// A host certificate signed by a CA trusted with @cert-authority.
	ca := transporttest.NewKey(t)
	hostKey := transporttest.NewKey(t)
	cert := &ssh.Certificate{Key: hostKey.PublicKey(), CertType: ssh.HostCert, ValidPrincipals: []string{"127.0.0.1"},
		ValidBefore: ssh.CertTimeInfinity, Serial: 1}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(cert, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	casrv, catarget, _ := setup(t, transporttest.Options{HostKey: certSigner})
	caLine := "@cert-authority " + knownhosts.Normalize(casrv.Addr) + " " + string(ssh.MarshalAuthorizedKey(ca.PublicKey()))
	if err := os.WriteFile(opts.ClusterKnownHosts, []byte(caLine), 0o600); err != nil {
		t.Fatal(err)
	}
	catarget.IdentityFiles = nil
	_, err = dial(t, catarget, opts)
	if err == nil || !errors.Is(err, transport.ErrAuth) {
		// The host key was accepted (the failure is the login, with no key offered).
		t.Fatalf("host certificate from a trusted CA: %v", err)
	}
}

// A host with the usual three host keys (RSA, ECDSA, ED25519) is reached with any one of them pinned, or a
// list of pins; known_hosts lines of any of its types work too. Go's client asks for ECDSA first unless told
// otherwise: a pin of the ED25519 key failed on such hosts.
func TestHostWithThreeKeyTypes(t *testing.T) {
	ed, ec, rsa := transporttest.NewKey(t), transporttest.NewKeyOf(t, "ecdsa"), transporttest.NewKeyOf(t, "rsa")
	srv, target, opts := setup(t, transporttest.Options{HostKey: ec, OtherHostKeys: []ssh.Signer{rsa, ed}})
	os.Remove(opts.ClusterKnownHosts)
	fp := func(s ssh.Signer) string { return ssh.FingerprintSHA256(s.PublicKey()) }
	wrong := fp(transporttest.NewKey(t))
	for name, pins := range map[string][]string{
		"ED25519 pinned": {fp(ed)}, "ECDSA pinned": {fp(ec)}, "RSA pinned": {fp(rsa)},
		"a list, the first wrong": {wrong, fp(rsa)}, "all three": {fp(rsa), fp(ec), fp(ed)},
	} {
		pinned := target
		pinned.HostKeys = pins
		if _, err := dial(t, pinned, opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// A pin matching none of the keys: the error names every key the host offered, with its type.
	pinned := target
	pinned.HostKeys = []string{wrong}
	_, err := dial(t, pinned, opts)
	var hk *transport.HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("a wrong pin: %v", err)
	}
	for _, want := range []string{fp(ed) + " (ED25519)", fp(ec) + " (ECDSA)", fp(rsa) + " (RSA)", wrong + " (pinned in the inventory)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	if transport.Retryable(err) {
		t.Error("a pin mismatch is retryable")
	}

	// known_hosts with the host's RSA line only, then ED25519 and ECDSA lines.
	addr := knownhosts.Normalize(srv.Addr)
	for name, keys := range map[string][]ssh.Signer{"RSA only": {rsa}, "ED25519 and ECDSA": {ed, ec}} {
		var lines string
		for _, k := range keys {
			lines += knownhosts.Line([]string{addr}, k.PublicKey()) + "\n"
		}
		if err := os.WriteFile(opts.ClusterKnownHosts, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := dial(t, target, opts); err != nil {
			t.Errorf("known_hosts with %s: %v", name, err)
		}
	}
}

func TestAuthFailureIsRetriedThenReported(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	target.IdentityFiles = nil // offer nothing the server accepts
	_, err := dial(t, target, opts)
	if !errors.Is(err, transport.ErrAuth) {
		t.Fatalf("got %v, want ErrAuth", err)
	}
	if n := srv.Connections(); n != opts.Retries+1 {
		t.Errorf("%d connections, want %d (authentication failures are retried)", n, opts.Retries+1)
	}
}

func TestPasswordAndEncryptedKey(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{Password: "s3cret"})
	target.IdentityFiles = nil
	asked := 0
	opts.Password = func(user, host string) (string, error) { asked++; return "s3cret", nil }
	d, err := transport.NewDialer(opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := d.Dial(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if asked != 1 {
		t.Errorf("password asked %d times, want once", asked)
	}

	// An encrypted key: the passphrase is asked once, through the callback.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("phrase"))
	if err != nil {
		t.Fatal(err)
	}
	_, t2, opts2 := setup(t, transporttest.Options{AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}})
	enc := filepath.Join(t.TempDir(), "enc")
	if err := os.WriteFile(enc, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	t2.IdentityFiles = []string{enc}
	if _, err := dial(t, t2, opts2); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Fatalf("encrypted key without passphrase: %v", err)
	}
	opts2.Passphrase = func(string) ([]byte, error) { return []byte("phrase"), nil }
	if _, err := dial(t, t2, opts2); err != nil {
		t.Fatalf("encrypted key with passphrase: %v", err)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{Stall: true})
	opts.ConnectTimeout = 300 * time.Millisecond
	opts.Retries = 1
	start := time.Now()
	_, err := dial(t, target, opts)
	var de *transport.DialError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a handshake timeout", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("dial took %s with a 300ms timeout", time.Since(start))
	}
}

func TestCancelEndsRemoteCommand(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	_, err = c.Run(ctx, "sleep 30", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	select {
	case sig := <-srv.Signals():
		if sig != "TERM" {
			t.Errorf("signal %q, want TERM", sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the remote command was not signalled")
	}
	// The connection is still usable.
	if _, err := c.Run(context.Background(), "true", nil); err != nil {
		t.Fatalf("after a cancelled command: %v", err)
	}
}

// TestPutKeepsPrevious checks File.Previous: the first write of a file keeps what it replaced (its
// content, mode and owner) or a marker that there was nothing; later writes keep nothing more.
func TestPutKeepsPrevious(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir, prev := t.TempDir(), t.TempDir()+"/kept"
	ctx := context.Background()
	key, conf := filepath.Join(dir, "pki/ca.key"), filepath.Join(dir, "admin.conf")
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	put := func(data string) {
		t.Helper()
		if _, err := c.Put(ctx, []transport.File{
			{Path: key, Data: []byte(data), Mode: 0o600, UID: os.Getuid(), GID: os.Getgid(), Previous: prev},
			{Path: conf, Data: []byte(data), Mode: 0o644, UID: os.Getuid(), GID: os.Getgid(), Previous: prev},
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("new")
	put("newer")
	if got, err := os.ReadFile(prev + key); err != nil || string(got) != "old" {
		t.Errorf("the kept ca.key: %q %v", got, err)
	}
	if st, err := os.Stat(prev + key); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the kept ca.key's mode: %v %v", st, err)
	}
	if _, err := os.Stat(prev + conf + transport.AbsentSuffix); err != nil {
		t.Errorf("no marker that admin.conf was not there: %v", err)
	}
	if _, err := os.Stat(prev + conf); !os.IsNotExist(err) {
		t.Errorf("admin.conf kept although it was not there before: %v", err)
	}
	if got, _ := os.ReadFile(key); string(got) != "newer" {
		t.Errorf("ca.key = %q", got)
	}
}

func TestPutIsAtomicIdempotentAndFixesModes(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	files := []transport.File{
		{Path: filepath.Join(dir, "etc/kubernetes/pki/ca.key"), Data: []byte("secret"), Mode: 0o600, UID: os.Getuid(), GID: os.Getgid()},
		{Path: filepath.Join(dir, "etc/kubernetes/admin.conf"), Data: []byte("config"), Mode: 0o644, UID: os.Getuid(), GID: os.Getgid()},
	}
	changed, err := c.Put(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	if !changed[0] || !changed[1] {
		t.Errorf("first put changed %v", changed)
	}
	st, err := os.Stat(files[0].Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v %v", st.Mode(), err)
	}
	if changed, err = c.Put(ctx, files); err != nil || changed[0] || changed[1] {
		t.Errorf("second put: changed %v, %v", changed, err)
	}
	os.Chmod(files[1].Path, 0o666)
	if changed, err = c.Put(ctx, files); err != nil || changed[0] || !changed[1] {
		t.Errorf("after a mode change: changed %v, %v", changed, err)
	}
	if st, _ := os.Stat(files[1].Path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode not restored: %v", st.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(files[0].Path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if _, err := c.Put(ctx, []transport.File{{Path: "relative/path"}}); err == nil {
		t.Error("relative path accepted")
	}
	got, err := c.Get(ctx, files[0].Path)
	if err != nil || string(got) != "secret" {
		t.Errorf("Get = %q, %v", got, err)
	}
	if _, err := c.Get(ctx, filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Get(missing) = %v, want ErrNotExist", err)
	}
}

// A connection lost while idle (the host gone between two operations): the next upload or command reports
// the host unreachable, as a loss in the middle of one does, not as a session it could not open.
func TestConnectionLostWhileIdle(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	opts.Keepalive = -1
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.Lost() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.Lost() == nil {
		t.Fatal("the connection's end was not noticed")
	}
	p := filepath.Join(t.TempDir(), "f")
	_, putErr := c.Put(context.Background(), []transport.File{{Path: p, Data: []byte("x"), UID: os.Getuid(), GID: os.Getgid()}})
	_, runErr := c.Run(context.Background(), "true", nil)
	for what, err := range map[string]error{"upload": putErr, "command": runErr} {
		var lost *transport.LostError
		if !errors.As(err, &lost) || lost.Host != target.Name || !strings.Contains(err.Error(), target.Name+": unreachable: ") {
			t.Errorf("%s on a connection lost while idle: %v, want a *LostError naming the host unreachable", what, err)
		}
	}
}

func TestDroppedConnectionMidUploadLeavesNoPartialFile(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{DropSFTPAfter: 64 << 10})
	opts.Keepalive = -1
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	_, err = c.Put(context.Background(), []transport.File{{Path: p, Data: big, UID: os.Getuid(), GID: os.Getgid()}})
	var lost *transport.LostError
	if !errors.As(err, &lost) || lost.Host != target.Name || !strings.Contains(err.Error(), "unreachable: the connection to") {
		t.Fatalf("upload over a dropped connection: %v, want a *LostError naming the host", err)
	}
	if err := c.Lost(); !errors.As(err, &lost) || lost.Err != nil {
		t.Errorf("Lost() after the drop: %v", err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "old content" {
		t.Fatalf("target changed by a failed upload: %d bytes", len(got))
	}

	// A new connection finishes the job and removes the leftover temporary file.
	_, target2, opts2 := setup(t, transporttest.Options{})
	c2, err := dial(t, target2, opts2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Put(context.Background(), []transport.File{{Path: p, Data: big, UID: os.Getuid(), GID: os.Getgid()}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, big) {
		t.Fatal("retried upload incomplete")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftover temporary files: %v", entries)
	}
}

func TestFanout(t *testing.T) {
	hosts := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	var running, peak atomic.Int32
	work := func(fail map[string]bool) func(context.Context, string) (bool, error) {
		return func(_ context.Context, h string) (bool, error) {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			running.Add(-1)
			if fail[h] {
				return false, fmt.Errorf("%s broke", h)
			}
			return h == "c", nil
		}
	}
	var events []transport.Event
	sink := transport.SinkFunc(func(e transport.Event) { events = append(events, e) })
	res, err := transport.Fanout(context.Background(), "play", hosts, transport.Policy{Limit: 3}, nil, work(nil))
	if err != nil {
		t.Fatal(err)
	}
	if peak.Load() > 3 {
		t.Errorf("%d hosts at once with limit 3", peak.Load())
	}
	for i, r := range res {
		want := transport.StatusOK
		if r.Host == "c" {
			want = transport.StatusChanged
		}
		if r.Host != hosts[i] || r.Status != want {
			t.Errorf("result %d: %+v", i, r)
		}
	}

	// Stop at the first failure: hosts not yet started are skipped.
	res, err = transport.Fanout(context.Background(), "cp", hosts, transport.Policy{Limit: 1}, sink, work(map[string]bool{"b": true}))
	var pe *transport.PlayError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Skipped != 8 {
		t.Fatalf("got %v", err)
	}
	if res[1].Status != transport.StatusFailed || res[2].Status != transport.StatusSkipped {
		t.Errorf("statuses %v %v", res[1].Status, res[2].Status)
	}
	if events[0].Type != transport.EventPlayStart || events[len(events)-1].Type != transport.EventPlayDone {
		t.Errorf("events: %+v", events)
	}

	// A tolerated fraction: 2 failures of 10 with MaxFail 0.2 is not an error, 3 is.
	if _, err := transport.Fanout(context.Background(), "w", hosts, transport.Policy{Limit: 4, MaxFail: 0.2}, nil,
		work(map[string]bool{"a": true, "j": true})); err != nil {
		t.Errorf("2 of 10 failed with MaxFail 0.2: %v", err)
	}
	if _, err := transport.Fanout(context.Background(), "w", hosts, transport.Policy{Limit: 4, MaxFail: 0.2}, nil,
		work(map[string]bool{"a": true, "b": true, "j": true})); !errors.As(err, &pe) {
		t.Errorf("3 of 10 failed with MaxFail 0.2: %v", err)
	}

	// Unreachable hosts are told apart from failed ones.
	res, _ = transport.Fanout(context.Background(), "x", []string{"u"}, transport.Policy{Limit: 1, MaxFail: 1}, nil,
		func(context.Context, string) (bool, error) {
			return false, &transport.DialError{Host: "u", Address: "u:22", Err: errors.New("refused")}
		})
	if res[0].Status != transport.StatusUnreachable {
		t.Errorf("status %v, want unreachable", res[0].Status)
	}

	// Cancellation stops the play.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := transport.Fanout(ctx, "x", hosts, transport.Policy{Limit: 2}, nil, work(nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled play: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"simple": "simple", "/etc/kubernetes": "/etc/kubernetes", "": "''", "a b": "'a b'", "it's": `'it'\''s'`, "$HOME": "'$HOME'",
	} {
		if got := transport.ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// BenchmarkPut measures Put of 10 files of 16 KiB over one connection to the in-process server: the first
// time (written) and unchanged (compared only).
func BenchmarkPut(b *testing.B) {
	for _, unchanged := range []bool{false, true} {
		name := "first"
		if unchanged {
			name = "unchanged"
		}
		b.Run(name, func(b *testing.B) {
			_, target, opts := setupB(b)
			d, err := transport.NewDialer(opts)
			if err != nil {
				b.Fatal(err)
			}
			c, err := d.Dial(context.Background(), target)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			dir := b.TempDir()
			files := make([]transport.File, 10)
			for i := range files {
				data := make([]byte, 16<<10)
				rand.Read(data)
				files[i] = transport.File{Path: filepath.Join(dir, fmt.Sprintf("f%d", i)), Data: data, UID: os.Getuid(), GID: os.Getgid()}
			}
			if unchanged {
				if _, err := c.Put(context.Background(), files); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if !unchanged {
					for _, f := range files {
						os.Remove(f.Path)
					}
				}
				if _, err := c.Put(context.Background(), files); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The sudo password goes to sudo only when it prompts: with cached credentials (or a NOPASSWD rule) the
// command's stdin is exactly what the caller gave, never the password. A fake sudo on PATH stands in for
// the real one (the in-process server runs commands on this machine).
func TestSudoPasswordOnlyWhenAsked(t *testing.T) {
	bin := t.TempDir()
	cached := filepath.Join(bin, "cached")
	fake := `#!/bin/sh
prompt=; nonint=
while [ $# -gt 0 ]; do
  case "$1" in -n) nonint=1 ;; -S) ;; -p) shift; prompt=$1 ;; --) shift; break ;; *) break ;; esac
  shift
done
if [ ! -e ` + cached + ` ]; then
  [ -n "$nonint" ] && { echo "sudo: a password is required" >&2; exit 1; }
  printf '%s' "$prompt" >&2
  IFS= read -r pw || { echo "sudo: no password was provided" >&2; exit 1; }
  [ "$pw" = secret ] || { echo "Sorry, try again." >&2; exit 1; }
fi
exec "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	_, target, opts := setup(t, transporttest.Options{})
	target.User = "alice"
	opts.BecomePassword = func() (string, error) { return "secret", nil }
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cache bool
	}{{"sudo prompts", false}, {"credentials cached", true}} {
		if tc.cache {
			if err := os.WriteFile(cached, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		res, err := c.Run(context.Background(), "cat; echo done >&2", []byte("body\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(res.Stdout) != "body\n" || string(res.Stderr) != "done\n" {
			t.Errorf("%s: the command read %q and wrote %q on stderr; want only its own stdin and stderr", tc.name, res.Stdout, res.Stderr)
		}
	}
	// A refused password: sudo's refusal reaches the error, the command never runs.
	os.Remove(cached)
	opts.BecomePassword = func() (string, error) { return "wrong", nil }
	if _, err := dial(t, target, opts); err == nil || !errors.Is(err, transport.ErrAuth) {
		t.Errorf("a wrong sudo password: %v", err)
	}
}

// Directories Put creates get 0755 whatever the umask of the server that creates them (sftp-server runs
// with umask 077).
func TestPutCreatesDirectoriesWithTheirMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "f")
	if _, err := c.Put(context.Background(), []transport.File{{Path: p, Data: []byte("x"), UID: os.Getuid(), GID: os.Getgid()}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b")} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v, want 0755", d, st.Mode().Perm(), err)
		}
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v", st.Mode().Perm())
	}
}

// What a command prints is bounded: a host that prints without end fails the command instead of filling
// the workstation's memory, and is not left blocked.
func TestRunOutputIsBounded(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(context.Background(), fmt.Sprintf("head -c %d /dev/zero", transport.MaxOutput+1), nil)
	if !errors.Is(err, transport.ErrOutputTooLarge) || len(res.Stdout) > transport.MaxOutput {
		t.Fatalf("got %d bytes, %v", len(res.Stdout), err)
	}
}

// Every argument of Cmdf and Args reaches the command as one word, whatever it holds.
func TestCmdfQuotesEveryArgument(t *testing.T) {
	hostile := []string{"", "plain", "a b", "'; touch /tmp/x; '", "$(id)", "`id`", "a\nb", "fe80::1%;touch${IFS}/x",
		`\"'\''`, "-n", "*", "~root", "x\x00"[:1] + "y"}
	for _, v := range hostile {
		cmd := transport.Cmdf("printf '%%s|' %s %d", v, 7) + "; printf '%s|' " + transport.Args(v, v)
		out, err := exec.Command("sh", "-c", cmd).Output()
		if want := v + "|7|" + v + "|" + v + "|"; err != nil || string(out) != want {
			t.Errorf("%q: sh -c %q printed %q (%v), want %q", v, cmd, out, err, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Cmdf took a value of a type it cannot quote")
		}
	}()
	_ = transport.Cmdf("echo %v", []string{"x"})
}

// PutFile streams a local file into place with its mode, creating the directory, leaving no temporary file;
// a cancelled context stops it before the target is replaced.
func TestPutFileStreams(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "snapshot.db")
	data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: many SFTP writes
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(t.TempDir(), "var/lib/clusterctl/etcd-restore/snapshot.db")
	if err := c.PutFile(context.Background(), local, remote, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(remote)
	st, _ := os.Stat(remote)
	if err != nil || !bytes.Equal(got, data) || st.Mode().Perm() != 0o600 {
		t.Fatalf("remote file: %d bytes (want %d), mode %v, %v", len(got), len(data), st.Mode(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.PutFile(ctx, local, remote+".2", 0o600); err == nil {
		t.Error("a cancelled upload succeeded")
	}
	entries, _ := os.ReadDir(filepath.Dir(remote))
	if len(entries) != 1 {
		t.Errorf("files left beside the target: %v", entries)
	}
	if err := c.PutFile(context.Background(), local, "relative", 0o600); err == nil {
		t.Error("relative path accepted")
	}
}

// A large file Put wrote is not hashed on the host again while its size and modification time are those
// the host's record holds; one changed behind Put's back (another time) is hashed and rewritten. Diff
// writes no record; lines of a record it does not understand are hashed again.
func TestPutRecordSparesHashing(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\necho x >>" + calls + "\nexec /usr/bin/sha256sum \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sha256sum"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	hashes := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	_, target, opts := setup(t, transporttest.Options{})
	dial2 := func() *transport.Conn {
		c, err := dial(t, target, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("k"), 2<<20)
	files := []transport.File{{Path: filepath.Join(dir, "kubelet"), Data: big, Mode: 0o755, UID: os.Getuid(), GID: os.Getgid()}}

	if changed, err := dial2().Put(ctx, files); err != nil || !changed[0] {
		t.Fatalf("first put: %v %v", changed, err)
	}
	rec, err := os.ReadFile(opts.RecordFile)
	if err != nil || !strings.Contains(string(rec), " "+strconv.Itoa(len(big))+" ") || !strings.HasSuffix(string(rec), " "+files[0].Path+"\n") {
		t.Fatalf("record: %q %v", rec, err)
	}
	if st, _ := os.Stat(opts.RecordFile); st.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v", st.Mode().Perm())
	}
	// A new connection (a new run): unchanged, and not hashed.
	if changed, err := dial2().Put(ctx, files); err != nil || changed[0] || hashes() != 0 {
		t.Errorf("unchanged put: changed %v, %v, %d hashes", changed, err, hashes())
	}
	if changes, err := dial2().Diff(ctx, files); err != nil || changes[0] != transport.ChangeNone || hashes() != 0 {
		t.Errorf("diff: %v, %v, %d hashes", changes, err, hashes())
	}

	// Changed behind Put's back, same size, another time: hashed, found different, rewritten.
	other := bytes.Repeat([]byte("x"), len(big))
	if err := os.WriteFile(files[0].Path, other, 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	os.Chtimes(files[0].Path, later, later)
	if changes, err := dial2().Diff(ctx, files); err != nil || changes[0] != transport.ChangeContent || hashes() != 1 {
		t.Errorf("diff after a change: %v, %v, %d hashes", changes, err, hashes())
	}
	if after, _ := os.ReadFile(opts.RecordFile); !bytes.Equal(after, rec) {
		t.Errorf("Diff wrote the record:\n%s", after)
	}
	if changed, err := dial2().Put(ctx, files); err != nil || !changed[0] {
		t.Errorf("put after a change: %v %v", changed, err)
	}
	if got, _ := os.ReadFile(files[0].Path); !bytes.Equal(got, big) {
		t.Error("not rewritten")
	}

	// A record of garbage: hashed, found the same, recorded again.
	os.WriteFile(opts.RecordFile, []byte("not a record\nzz 1 2 /x\n"), 0o600)
	n := hashes()
	if changed, err := dial2().Put(ctx, files); err != nil || changed[0] || hashes() != n+1 {
		t.Errorf("put with a garbage record: %v, %v, %d hashes", changed, err, hashes()-n)
	}
	if after, _ := os.ReadFile(opts.RecordFile); !strings.HasSuffix(string(after), " "+files[0].Path+"\n") || strings.Contains(string(after), "garbage") {
		t.Errorf("record after garbage: %q", after)
	}
	if changed, err := dial2().Put(ctx, files); err != nil || changed[0] || hashes() != n+1 {
		t.Errorf("put after re-recording: %v, %v, %d hashes", changed, err, hashes()-n-1)
	}

	// A record too large to be clusterctl's (over 1 MiB): ignored, hashed, written anew.
	os.WriteFile(opts.RecordFile, bytes.Repeat([]byte("#\n"), 1<<20), 0o600)
	if changed, err := dial2().Put(ctx, files); err != nil || changed[0] || hashes() != n+2 {
		t.Errorf("put with an oversized record: %v, %v, %d hashes", changed, err, hashes()-n-1)
	}
	if st, _ := os.Stat(opts.RecordFile); st.Size() > 1000 {
		t.Errorf("the oversized record was kept: %d bytes", st.Size())
	}
}

// A file streamed from a local source is put like one held in memory; a source changed since it was listed
// (its digest no longer the one given) is refused before the rename, and nothing of it is left.
func TestPutStreamsSources(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	local, dir := t.TempDir(), t.TempDir()
	content := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16*10) // ~3 MiB
	src := filepath.Join(local, "kubelet")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	f := transport.File{Path: filepath.Join(dir, "usr/local/bin/kubelet"), Source: src, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]),
		Mode: 0o755, UID: os.Getuid(), GID: os.Getgid()}
	if changed, err := c.Put(ctx, []transport.File{f}); err != nil || !changed[0] {
		t.Fatalf("put: %v %v", changed, err)
	}
	if got, _ := os.ReadFile(f.Path); !bytes.Equal(got, content) {
		t.Fatal("the streamed file differs from its source")
	}
	if changed, err := c.Put(ctx, []transport.File{f}); err != nil || changed[0] {
		t.Errorf("unchanged: %v %v", changed, err)
	}

	// The source changes after it was listed (same size): the host keeps what it had.
	tampered := bytes.Clone(content)
	tampered[len(tampered)/2] ^= 1
	os.WriteFile(src, tampered, 0o644)
	f2 := f
	f2.Path = filepath.Join(dir, "usr/local/bin/kubectl")
	_, err = c.Put(ctx, []transport.File{f2})
	if err == nil || !strings.Contains(err.Error(), "changed since it was listed") {
		t.Fatalf("a changed source: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(f.Path))
	if len(entries) != 1 || entries[0].Name() != "kubelet" {
		t.Errorf("left behind: %v", entries)
	}

	for _, bad := range []transport.File{
		{Path: f.Path, Source: src, Size: 1},
		{Path: f.Path, Source: src, Size: 1, SHA256: f.SHA256, Data: []byte("x")},
	} {
		if _, err := c.Put(ctx, []transport.File{bad}); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// At debug level each command and upload is logged with its host and time; a command by its program, a
// script by its opening comment, never by its data.
func TestDebugLogOfCommandsAndUploads(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	var logged bytes.Buffer
	opts.Log = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Run(ctx, "sh -s", []byte("# Managed by clusterctl: a test script\necho secret-data\n")); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Run(ctx, "printf %s secret-arg; exit 4", nil)
	if _, err := c.Put(ctx, []transport.File{{Path: filepath.Join(t.TempDir(), "f"), Data: []byte("secret-content"), Mode: 0o644, UID: os.Getuid(), GID: os.Getgid()}}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _ = c.Run(cctx, "sleep 5", nil) // cancelled: logged with why
	cancel()
	out := logged.String()
	for _, want := range []string{
		`msg=ran host=h1 command="sh -s: # Managed by clusterctl: a test script" took=`,
		`command=sleep took=`,
		`exit=-1 err=`,
		`msg=ran host=h1 command=printf took=`,
		`exit=4`,
		`msg=put host=h1 files=1 changed=1 took=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("the log carries a command's or a file's data:\n%s", out)
	}
}
