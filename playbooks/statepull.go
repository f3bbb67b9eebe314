package playbooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/hardening"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/tasks/statepull"
	"github.com/clusterctl/clusterctl/transport"
)

// PullResult is what `clusterctl state pull` recovered.
type PullResult struct {
	StateDir string   `json:"stateDir"`
	From     []string `json:"from"`
	Files    int      `json:"files"`
	// CAHash is the pulled cluster CA's (kubeadm's --discovery-token-ca-cert-hash).
	CAHash         string `json:"caHash"`
	EncryptionKeys int    `json:"encryptionKeys"`
	// Drift is what up would change from the pulled state, by host: none when the state is whole.
	Drift map[string]int `json:"drift"`
	// NotJoined are the inventory's control-plane and etcd hosts that are not part of the cluster yet.
	NotJoined []string `json:"notJoined,omitempty"`
	// NotRecovered says what a state directory may hold that the hosts cannot give back.
	NotRecovered []string `json:"notRecovered"`
}

// notRecovered is what only the workstation that ran a command holds.
var notRecovered = []string{
	"the journals of runs under way (runs/): an upgrade, CA rotation or restore interrupted on another workstation resumes only there",
	"the etcd snapshots taken before upgrades (runs/): take one now with clusterctl etcd snapshot",
	"the bootstrap token: a new one is made when a node joins",
	"the addresses learned from hosts without internalAddress: learned again from their facts",
}

// StatePull rebuilds the session's (empty) state directory from the cluster's control-plane and etcd hosts
// (statepull.Pull on each), checked to agree, then renders what the hosts do not hold (a new admin.conf,
// signed by the pulled CA) with up's dry run, whose drift says whether the state is whole.
func StatePull(ctx context.Context, e *Env) (*PullResult, error) {
	var hosts []*inventory.Host
	for _, h := range e.Hosts {
		if h.Has(inventory.RoleControlPlane) || h.Has(inventory.RoleEtcd) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, errors.New("no control-plane or etcd host to pull from (--limit left none?)")
	}
	if _, err := Connect(ctx, e, hosts, 0); err != nil {
		return nil, err
	}
	pulled, encs, pending, err := pullHosts(ctx, e, hosts)
	if err != nil {
		return nil, err
	}
	if len(pending) == len(hosts) {
		return nil, fmt.Errorf("none of %v is part of a cluster (no %s)", names(hosts), kubeadm.PKIDir)
	}
	files, err := statepull.Merge(pulled)
	if err != nil {
		return nil, err
	}
	res := &PullResult{StateDir: e.StateDir, Files: len(files), NotRecovered: notRecovered, NotJoined: pending}
	for _, h := range hosts {
		if !slices.Contains(pending, h.Name) {
			res.From = append(res.From, h.Name)
		}
	}
	if err := writePulled(e.StateDir, files, encs, hosts, res); err != nil {
		return nil, err
	}
	if err := statedir.MarkBuilt(e.StateDir, e.Inv.Cluster.Name, time.Now()); err != nil {
		return nil, err
	}
	if res.Drift, err = drift(ctx, e); err != nil {
		return res, fmt.Errorf("the state was pulled, but up's dry run from it failed: %w", err)
	}
	return res, nil
}

// pullHosts reads every host's files, and each control-plane host's encryption configuration; pending are
// the hosts not part of the cluster yet.
func pullHosts(ctx context.Context, e *Env, hosts []*inventory.Host) (_ [][]statepull.File, _ map[string][]byte, pending []string, _ error) {
	pulled := make([][]statepull.File, len(hosts))
	encs := map[string][]byte{}
	var mu sync.Mutex
	index := map[string]int{}
	for i, h := range hosts {
		index[h.Name] = i
	}
	_, err := e.play(ctx, Play{Name: "pull", Hosts: names(hosts), Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
		h, conn := e.Inv.Host(name), e.Conn(name)
		files, err := statepull.Pull(ctx, conn, h.NodeName)
		if errors.Is(err, statepull.ErrNotJoined) {
			e.say("pull", name, "%v", err)
			mu.Lock()
			pending = append(pending, name)
			mu.Unlock()
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var enc []byte
		if h.Has(inventory.RoleControlPlane) {
			if enc, err = conn.Get(ctx, kubeadm.EncryptionConfig); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
		}
		mu.Lock()
		pulled[index[name]] = files
		if enc != nil {
			encs[name] = enc
		}
		mu.Unlock()
		return false, nil
	}})
	slices.Sort(pending)
	return pulled, encs, pending, err
}

// writePulled writes the files (0600) and the encryption keys, which every control-plane host must agree on.
func writePulled(dir string, files []statepull.File, encs map[string][]byte, hosts []*inventory.Host, res *PullResult) error {
	for _, f := range files {
		if err := statedir.WriteFile(filepath.Join(dir, filepath.FromSlash(f.Rel)), f.Data, 0o600); err != nil {
			return err
		}
	}
	var first string
	for _, h := range hosts {
		enc, ok := encs[h.Name]
		switch {
		case !ok:
		case first == "":
			first = h.Name
		case !bytes.Equal(enc, encs[first]):
			return fmt.Errorf("%s differs between %s and %s: an encryption rotate left half done? finish it, then pull", kubeadm.EncryptionConfig, first, h.Name)
		}
	}
	if first != "" {
		keys, err := hardening.KeysFromConfig(encs[first])
		if err != nil {
			return fmt.Errorf("%s: %w", first, err)
		}
		if err := hardening.SaveKeys(dir, keys); err != nil {
			return err
		}
		res.EncryptionKeys = len(keys.Keys)
	}
	data, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		return fmt.Errorf("no cluster CA on %s: %w", first, err)
	}
	ca, err := pki.ParseCert(data)
	if err != nil {
		return err
	}
	res.CAHash = pki.CAHash(ca)
	return nil
}
