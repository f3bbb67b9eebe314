package transport

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // known_hosts hashes names with HMAC-SHA1; this only reads that format
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeys verifies host keys against known_hosts files (hashed entries and @cert-authority lines
// included), a fingerprint pinned in the inventory, and, only when asked, records keys of hosts never seen
// before in the cluster's own known_hosts (trust on first use).
type hostKeys struct {
	files     []string // existing files, checked in order
	own       string   // the cluster's known_hosts, where accepted keys are written
	acceptNew bool
	// recordTrusted: a key the files trust is recorded in own too (Options.RecordTrusted).
	recordTrusted bool

	mu       sync.Mutex
	check    ssh.HostKeyCallback
	accepted map[string]ssh.PublicKey // address -> key accepted in this run

	// The key types known for each host, read once (a fan-out asks for every host).
	plain  map[string][]string // normalized host -> key types
	hashed []hashedEntry
}

// hashedEntry is a hashed known_hosts name (|1|salt|hash) and its key type.
type hashedEntry struct {
	name    string
	keyType string
}

func newHostKeys(own string, others []string, acceptNew bool) (*hostKeys, error) {
	hk := &hostKeys{own: own, acceptNew: acceptNew, accepted: map[string]ssh.PublicKey{}}
	if err := hk.load(append([]string{own}, others...)); err != nil {
		return nil, err
	}
	return hk, nil
}

func (hk *hostKeys) load(files []string) error {
	hk.files = nil
	for _, f := range files {
		if f == "" {
			continue
		}
		f = expandHome(f)
		if _, err := os.Stat(f); err == nil {
			hk.files = append(hk.files, f)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("known_hosts %s: %w", f, err)
		}
	}
	if len(hk.files) == 0 {
		hk.check = nil
		return nil
	}
	cb, err := knownhosts.New(hk.files...)
	if err != nil {
		return fmt.Errorf("reading known_hosts: %w", err)
	}
	hk.check = cb
	hk.index()
	return nil
}

// index reads the key types of every host in the files (knownhosts.New has read them whole already: their
// size is not bounded here either).
func (hk *hostKeys) index() {
	hk.plain = map[string][]string{}
	hk.hashed = nil
	for _, f := range hk.files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line[0] == '#' || line[0] == '@' {
				continue
			}
			_, hosts, key, _, _, err := ssh.ParseKnownHosts([]byte(line))
			if err != nil {
				continue
			}
			for _, h := range hosts {
				if strings.HasPrefix(h, "|1|") {
					hk.hashed = append(hk.hashed, hashedEntry{name: h, keyType: key.Type()})
				} else {
					hk.plain[h] = append(hk.plain[h], key.Type())
				}
			}
		}
	}
}

// callback returns the ssh.HostKeyCallback for one host: name is the inventory name (for messages), pins
// optional SHA256 fingerprints, one of which must match.
func (hk *hostKeys) callback(name string, pins []string) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		offered := describeKey(key)
		if len(pins) > 0 {
			if slices.Contains(pins, ssh.FingerprintSHA256(key)) {
				return nil
			}
			e := &HostKeyError{Host: name, Address: hostname, Offered: offered,
				Hint: "if the host was reinstalled on purpose, update its ssh.hostKey in the inventory"}
			for _, p := range pins {
				e.Expected = append(e.Expected, p+" (pinned in the inventory)")
			}
			return e
		}
		hk.mu.Lock()
		defer hk.mu.Unlock()
		if k, ok := hk.accepted[hostname]; ok {
			if bytes.Equal(k.Marshal(), key.Marshal()) {
				return nil
			}
			// The key accepted earlier in this run is as binding as a known_hosts line: another key now
			// is a mismatch, final, never accepted as new.
			return &HostKeyError{Host: name, Address: hostname, Offered: offered,
				Expected: []string{ssh.FingerprintSHA256(k) + " (accepted earlier in this run, recorded in " + hk.own + ")"},
				Hint:     "the host offered another key on a later connection of the same run; find out why before trusting either"}
		}
		var err error
		if hk.check != nil {
			err = hk.check(hostname, remote, key)
			if err == nil && hk.recordTrusted {
				if err := hk.record(hostname, key); err != nil {
					return err
				}
				hk.accepted[hostname] = key // recorded once; as binding as the files for the rest of the run
			}
			if err == nil {
				return nil
			}
		}
		var ke *knownhosts.KeyError
		switch {
		case hk.check != nil && errors.As(err, &ke) && len(ke.Want) > 0:
			e := &HostKeyError{Host: name, Address: hostname, Offered: offered,
				Hint: fmt.Sprintf("if the host was reinstalled on purpose, remove the old key with: ssh-keygen -R %s -f %s",
					knownhosts.Normalize(hostname), ke.Want[0].Filename)}
			for _, w := range ke.Want {
				e.Expected = append(e.Expected, fmt.Sprintf("%s (%s:%d)", ssh.FingerprintSHA256(w.Key), w.Filename, w.Line))
			}
			return e
		case hk.check != nil && !errors.As(err, &ke):
			return err // a revoked key, a bad certificate: final as well
		case hk.acceptNew:
			if err := hk.record(hostname, key); err != nil {
				return err
			}
			hk.accepted[hostname] = key
			return nil
		default:
			return &HostKeyError{Host: name, Address: hostname, Offered: offered, Unknown: true,
				Hint: fmt.Sprintf("add it to %s (ssh-keyscan), pin it in the inventory (ssh.hostKey), or, for throwaway machines, pass --ssh-accept-new", hk.own)}
		}
	}
}

// record appends the key to the cluster's own known_hosts (0600, in a 0700 directory).
func (hk *hostKeys) record(hostname string, key ssh.PublicKey) error {
	if hk.own == "" {
		return errors.New("no known_hosts file to record new host keys in")
	}
	if err := os.MkdirAll(filepath.Dir(hk.own), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(hk.own, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// algorithms returns the host key algorithms known for an address, so that the server is asked for a key
// type we can check (otherwise it may offer ed25519 while known_hosts holds its RSA key).
func (hk *hostKeys) algorithms(address string) []string {
	want := knownhosts.Normalize(address)
	var algos []string
	seen := map[string]bool{}
	add := func(keyType string) {
		for _, a := range keyAlgorithms(keyType) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	for _, t := range hk.plain[want] {
		add(t)
	}
	for _, e := range hk.hashed {
		if hashedMatch(e.name, want) {
			add(e.keyType)
		}
	}
	return algos
}

// hashedMatch checks a hashed known_hosts entry (|1|salt|hash, HMAC-SHA1 of the name) against a name.
func hashedMatch(entry, host string) bool {
	parts := strings.Split(entry, "|")
	if len(parts) != 4 {
		return false
	}
	salt, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil)) == parts[3]
}

// describeKey is a key's fingerprint and type as ssh-keygen -l prints them: "SHA256:... (ED25519)".
func describeKey(key ssh.PublicKey) string {
	t := key.Type()
	switch {
	case t == ssh.KeyAlgoED25519:
		t = "ED25519"
	case strings.HasPrefix(t, "ecdsa-"):
		t = "ECDSA"
	case t == ssh.KeyAlgoRSA:
		t = "RSA"
	}
	return ssh.FingerprintSHA256(key) + " (" + t + ")"
}

func keyAlgorithms(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return p
}
