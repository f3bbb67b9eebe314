package pki

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Store keeps the cluster's PKI in a directory of the state directory:
//
//	ca.crt ca.key front-proxy-ca.{crt,key} etcd/ca.{crt,key} sa.key sa.pub    the cluster's
//	nodes/<node>/apiserver.{crt,key} ... etcd/server.{crt,key} ...            each control-plane node's
//
// The directory is 0700 and keys 0600; looser permissions are refused, as ssh refuses them.
type Store struct {
	Dir    string
	Issuer *Issuer
	// RenewIssuedBefore asks for leaves issued before this time to be issued anew (certs rotate); their keys
	// are kept unless NewKeys. Zero: leaves are kept while they match their spec.
	RenewIssuedBefore time.Time
	NewKeys           bool
	// RenewOnly limits the renewal to these leaf names (apiserver, etcd-server, ...); empty: all.
	RenewOnly []string
}

// renewal says why a valid leaf is to be issued anew, or "".
func (st *Store) renewal(name string, cert *x509.Certificate) string {
	if st.RenewIssuedBefore.IsZero() || !cert.NotBefore.Before(st.RenewIssuedBefore) {
		return ""
	}
	if len(st.RenewOnly) > 0 && !slices.Contains(st.RenewOnly, name) {
		return ""
	}
	return "renewal requested"
}

// PKI is the loaded or generated material.
type PKI struct {
	CAs   map[string]*KeyPair // by spec name; Key is nil for an external CA
	SA    crypto.Signer
	Nodes map[string]map[string]*KeyPair // node -> spec name -> pair
	Specs map[string][]Spec              // node -> its leaf specs
}

// Change is one thing Ensure did.
type Change struct {
	What   string // "ca", "nodes/cp1/apiserver", ...
	Action string // created, reissued
	Reason string
}

// Ensure loads what is there and valid, makes what is missing, and reissues leaves that no longer match
// the inventory (a new SAN, a new address). With an external CA (a CA certificate without its key) nothing
// can be signed: every leaf must then be present and valid, and the error lists each one that is not.
func (st *Store) Ensure(c Cluster, nodes []Node) (*PKI, []Change, error) {
	if err := checkDir(st.Dir); err != nil {
		return nil, nil, err
	}
	p := &PKI{CAs: map[string]*KeyPair{}, Nodes: map[string]map[string]*KeyPair{}, Specs: map[string][]Spec{}}
	changes, err := st.ensureCAs(p)
	if err != nil {
		return nil, nil, err
	}
	jobs, problems, err := st.planLeaves(c, nodes, p)
	if err != nil {
		return nil, nil, err
	}
	if err := st.makeLeaves(nodes, p, jobs); err != nil {
		return nil, nil, err
	}
	for _, j := range jobs {
		if err := st.write(j.rel, j.out); err != nil {
			return nil, nil, err
		}
		action, reason := "reissued", j.reason
		if reason == "missing" {
			action, reason = "created", ""
		}
		changes = append(changes, Change{What: j.rel, Action: action, Reason: reason})
		p.Nodes[j.node][j.spec.Name] = j.out
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, nil, fmt.Errorf("external CA mode (a CA certificate without its key in %s): these certificates must be provided and valid:\n  %s",
			st.Dir, strings.Join(problems, "\n  "))
	}
	return p, changes, nil
}

// ensureCAs makes or loads the CAs and the service-account key; they are independent, so in parallel.
func (st *Store) ensureCAs(p *PKI) ([]Change, error) {
	cas := CAs()
	kps := make([]*KeyPair, len(cas))
	created := make([]bool, len(cas)+1)
	var sa crypto.Signer
	g := new(errgroup.Group)
	for i, s := range cas {
		g.Go(func() (err error) {
			kps[i], created[i], err = st.ensureCA(s)
			return err
		})
	}
	g.Go(func() (err error) {
		sa, created[len(cas)], err = st.ensureSA()
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var changes []Change
	for i, s := range cas {
		if created[i] {
			changes = append(changes, Change{What: s.Path, Action: "created"})
		}
		p.CAs[s.Name] = kps[i]
	}
	p.SA = sa
	if created[len(cas)] {
		changes = append(changes, Change{What: "sa", Action: "created"})
	}
	return changes, nil
}

// leafJob is a leaf certificate to (re)issue, and why.
type leafJob struct {
	node   string
	spec   Spec
	rel    string
	ca     *KeyPair
	key    crypto.Signer // kept from the current pair, or nil for a new key
	reason string
	out    *KeyPair
}

// planLeaves keeps every node's valid leaves in p and lists those to issue; with an external CA (no key),
// those it cannot issue are problems.
func (st *Store) planLeaves(c Cluster, nodes []Node, p *PKI) (jobs []leafJob, problems []string, err error) {
	now := st.Issuer.now()
	for _, n := range nodes {
		specs, err := Leaves(c, n)
		if err != nil {
			return nil, nil, err
		}
		p.Specs[n.Name] = specs
		p.Nodes[n.Name] = map[string]*KeyPair{}
		for _, s := range specs {
			rel := filepath.Join("nodes", n.Name, s.Path)
			ca := p.CAs[s.CA]
			cur, err := st.load(rel)
			reason := ""
			switch {
			case errors.Is(err, fs.ErrNotExist):
				reason = "missing"
			case err != nil:
				return nil, nil, err
			default:
				reason = Mismatch(s, cur.Cert, ca.Cert, now)
				if reason == "" {
					reason = st.renewal(s.Name, cur.Cert)
				}
			}
			if reason == "" {
				p.Nodes[n.Name][s.Name] = cur
				continue
			}
			if ca.Key == nil {
				problems = append(problems, fmt.Sprintf("%s.crt: %s", rel, reason))
				continue
			}
			var key crypto.Signer
			if cur != nil && matches(cur.Key, st.Issuer.Algorithm) && !st.NewKeys {
				key = cur.Key
			}
			jobs = append(jobs, leafJob{node: n.Name, spec: s, rel: rel, ca: ca, key: key, reason: reason})
		}
	}
	return jobs, problems, nil
}

// makeLeaves issues the jobs' leaves. The node-independent client certificates (the API server's kubelet
// and etcd client, front-proxy client, etcd health check) name no node: control-plane nodes share one key
// pair each, kept in every node's directory. A node that lacks one gets another node's valid pair; one is
// made only when none is. Control-plane nodes hold the CA keys anyway, so sharing adds no exposure, and it
// saves most of the key generation for HA control planes. Key generation dominates (RSA especially): leaves
// are made in parallel.
func (st *Store) makeLeaves(nodes []Node, p *PKI, jobs []leafJob) error {
	shared := map[string]*KeyPair{}
	for _, n := range nodes {
		for _, spec := range p.Specs[n.Name] {
			if kp := p.Nodes[n.Name][spec.Name]; kp != nil && !spec.PerNode && shared[spec.Name] == nil {
				shared[spec.Name] = kp
			}
		}
	}
	first := map[string]int{} // spec name -> the job that makes the shared pair
	for i, j := range jobs {
		if !j.spec.PerNode && shared[j.spec.Name] == nil {
			if _, ok := first[j.spec.Name]; !ok {
				first[j.spec.Name] = i
			}
		}
	}
	g := new(errgroup.Group)
	g.SetLimit(runtime.NumCPU())
	for i := range jobs {
		if !jobs[i].spec.PerNode && (shared[jobs[i].spec.Name] != nil || first[jobs[i].spec.Name] != i) {
			continue
		}
		g.Go(func() error {
			kp, err := st.Issuer.NewLeaf(jobs[i].spec, jobs[i].ca, jobs[i].key)
			jobs[i].out = kp
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i := range jobs {
		if jobs[i].out != nil {
			continue
		}
		if kp := shared[jobs[i].spec.Name]; kp != nil {
			jobs[i].out = kp
		} else {
			jobs[i].out = jobs[first[jobs[i].spec.Name]].out
		}
	}
	return nil
}

func (st *Store) ensureCA(s Spec) (*KeyPair, bool, error) {
	crtPath := filepath.Join(st.Dir, s.Path+".crt")
	data, err := os.ReadFile(crtPath)
	if errors.Is(err, fs.ErrNotExist) {
		if _, kerr := os.Stat(filepath.Join(st.Dir, s.Path+".key")); kerr == nil {
			return nil, false, fmt.Errorf("%s.key exists without %s.crt", s.Path, s.Path)
		}
		kp, err := st.Issuer.NewCA(s)
		if err != nil {
			return nil, false, err
		}
		return kp, true, st.write(s.Path, kp)
	}
	if err != nil {
		return nil, false, err
	}
	cert, err := ParseCert(data)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", crtPath, err)
	}
	if !cert.IsCA {
		return nil, false, fmt.Errorf("%s is not a CA certificate", crtPath)
	}
	if now := st.Issuer.now(); now.After(cert.NotAfter) {
		return nil, false, fmt.Errorf("%s expired on %s: rotate the CA (clusterctl certs rotate --ca)", crtPath, cert.NotAfter)
	}
	key, err := st.readKey(s.Path + ".key")
	if errors.Is(err, fs.ErrNotExist) {
		return &KeyPair{Cert: cert}, false, nil // external CA
	}
	if err != nil {
		return nil, false, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, false, fmt.Errorf("%s.key does not belong to %s.crt", s.Path, s.Path)
	}
	return &KeyPair{Cert: cert, Key: key}, false, nil
}

func (st *Store) ensureSA() (crypto.Signer, bool, error) {
	key, err := st.readKey("sa.key")
	if err == nil {
		return key, false, st.writePublic(key)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	key, err = GenerateKey(st.Issuer.Algorithm)
	if err != nil {
		return nil, false, err
	}
	pemKey, err := EncodeKey(key)
	if err != nil {
		return nil, false, err
	}
	if err := statedir.WriteFile(filepath.Join(st.Dir, "sa.key"), pemKey, 0o600); err != nil {
		return nil, false, err
	}
	return key, true, st.writePublic(key)
}

func (st *Store) writePublic(key crypto.Signer) error {
	pub, err := EncodePublicKey(key.Public())
	if err != nil {
		return err
	}
	p := filepath.Join(st.Dir, "sa.pub")
	if old, err := os.ReadFile(p); err == nil && string(old) == string(pub) {
		return nil
	}
	return statedir.WriteFile(p, pub, 0o644)
}

// load reads rel.crt and rel.key.
func (st *Store) load(rel string) (*KeyPair, error) {
	data, err := os.ReadFile(filepath.Join(st.Dir, rel+".crt"))
	if err != nil {
		return nil, err
	}
	cert, err := ParseCert(data)
	if err != nil {
		return nil, fmt.Errorf("%s.crt: %w", rel, err)
	}
	key, err := st.readKey(rel + ".key")
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%s.key does not belong to %s.crt", rel, rel)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// readKey reads a private key, refusing one that others can read.
func (st *Store) readKey(rel string) (crypto.Signer, error) {
	p := filepath.Join(st.Dir, rel)
	data, err := ReadSecret(p)
	if err != nil {
		return nil, err
	}
	k, err := ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return k, nil
}

func (st *Store) write(rel string, kp *KeyPair) error {
	key, err := EncodeKey(kp.Key)
	if err != nil {
		return err
	}
	if err := statedir.WriteFile(filepath.Join(st.Dir, rel+".key"), key, 0o600); err != nil {
		return err
	}
	return statedir.WriteFile(filepath.Join(st.Dir, rel+".crt"), EncodeCert(kp.Cert), 0o644)
}

// ReadSecret reads a file of the state directory that holds a private key (a key, a kubeconfig with its
// client key), refusing one that others can read or write, as ssh refuses a loose key.
func ReadSecret(p string) ([]byte, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o and holds a private key others can read: refusing it (chmod 600 %s)", p, info.Mode().Perm(), p)
	}
	return os.ReadFile(p)
}

// checkDir creates the pki directory (0700) or refuses an existing one others can enter.
func checkDir(dir string) error {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: it holds private keys and must not be accessible by others (chmod 700 %s)", dir, info.Mode().Perm(), dir)
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	da, err1 := x509.MarshalPKIXPublicKey(a)
	db, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && string(da) == string(db)
}
