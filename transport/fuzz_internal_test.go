package transport

import (
	"bytes"
	"crypto/ed25519"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// FuzzSSHConfig feeds the ssh_config reader arbitrary text: reading it and completing a target from it
// (HostName, User, Port, IdentityFile, ProxyJump) must never panic or hang, and a port read from it is one
// a TCP address can have.
//
//	go test ./transport -run '^$' -fuzz FuzzSSHConfig -fuzztime 60s
func FuzzSSHConfig(f *testing.F) {
	f.Add([]byte("Host cp1\n  HostName 10.0.0.1\n  User admin\n  Port 2222\n  IdentityFile ~/.ssh/lab\n  ProxyJump jump@bastion:22\n"), "cp1")
	f.Add([]byte("Host *\n  ProxyJump a,b\nHost a\n  ProxyJump b\nHost b\n  ProxyJump a\n  Port 99999\n"), "x")
	f.Add([]byte("Match host x\n  HostName %h.example\nInclude /nonexistent\n"), "x")
	f.Fuzz(func(t *testing.T, config []byte, host string) {
		file := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(file, config, 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := NewDialer(Options{SSHConfig: file, KnownHosts: []string{}})
		if err != nil {
			return // refused with an error: fine
		}
		got := d.fromSSHConfig(Target{Address: host})
		for _, p := range append([]int{got.Port}, hopPorts(got.Bastions)...) {
			if p < 0 || p > 65535 {
				t.Fatalf("port %d taken from the config", p)
			}
		}
	})
}

func hopPorts(hops []Hop) []int {
	var out []int
	for _, h := range hops {
		out = append(out, h.Port)
	}
	return out
}

// FuzzKnownHosts feeds the known_hosts reader arbitrary text: loading it and checking a host's key against
// it must never panic, and a key is accepted only when a line names it.
//
//	go test ./transport -run '^$' -fuzz FuzzKnownHosts -fuzztime 60s
func FuzzKnownHosts(f *testing.F) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		f.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	// The key's base64 as a known_hosts line has it: every line that accepts it names it so.
	keyText := strings.Fields(string(ssh.MarshalAuthorizedKey(key)))[1]
	line := "cp1,10.0.0.1 " + string(ssh.MarshalAuthorizedKey(key))
	f.Add([]byte(line))
	f.Add([]byte("@cert-authority *.example " + string(ssh.MarshalAuthorizedKey(key))))
	f.Add([]byte("|1|c2FsdA==|aGFzaA== ssh-ed25519 AAAA\n# comment\n\n@revoked * x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "known_hosts")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		hk, err := newHostKeys(file, nil, false)
		if err != nil {
			return
		}
		addr := &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 22}
		if err := hk.callback("cp1", nil)("10.0.0.1:22", addr, key); err == nil && !bytes.Contains(data, []byte(keyText)) {
			t.Fatalf("the key was accepted, and no line names it:\n%q", data)
		}
		_ = hk.algorithms("10.0.0.1:22")
	})
}
