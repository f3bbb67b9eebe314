package playbooks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/hardening"
)

// This file is encryption at rest on a running cluster: what is stored under which key (status), objects
// written before brought under the write key (up's encryption step), and the rotation of the key.

// EncryptionKey is one of the state directory's keys as status shows it (never its secret).
type EncryptionKey struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Write: the API servers encrypt with it; the others only decrypt.
	Write bool `json:"write"`
}

// EncryptionStatus is what etcd holds of the encrypted resources, against the state directory's keys.
type EncryptionStatus struct {
	Keys      []EncryptionKey    `json:"keys"`
	Resources []hardening.Stored `json:"resources"`
	// Stale counts objects not under the write key (in clear, or under an older key).
	Stale int `json:"stale"`
}

// keysInfo lists keys for status, the write key first.
func keysInfo(k *hardening.Keys) []EncryptionKey {
	out := make([]EncryptionKey, 0, len(k.Keys))
	for i, key := range k.Keys {
		out = append(out, EncryptionKey{Name: key.Name, Created: key.Created, Write: i == 0})
	}
	return out
}

// EncryptionState reads, from etcd, how each encrypted resource's objects are stored.
func EncryptionState(ctx context.Context, e *Env) (*EncryptionStatus, error) {
	keys, err := loadKeys(e)
	if err != nil {
		return nil, err
	}
	stored, err := scanStored(ctx, e, keys)
	if err != nil {
		return nil, err
	}
	st := &EncryptionStatus{Keys: keysInfo(keys), Resources: stored}
	for _, s := range stored {
		st.Stale += len(s.Stale)
	}
	return st, nil
}

// loadKeys reads the state directory's keys; a cluster has them from its first up (render makes them).
func loadKeys(e *Env) (*hardening.Keys, error) {
	keys, err := hardening.ReadKeys(e.StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the state directory %s has no encryption key: clusterctl up makes one and configures the API servers with it: %w", e.StateDir, err)
	}
	return keys, err
}

// snapshotReadable checks, before a restore, that every object of the encrypted resources in the
// snapshot is in clear or under a key the state directory has: one under a key retired since (encryption
// rotate after the snapshot was taken) is one no API server could read. A state directory without keys
// (a cluster from before encryption) has nothing to check against.
func snapshotReadable(ctx context.Context, e *Env, snapshot string) error {
	file := filepath.Join(e.StateDir, hardening.KeysFile)
	keys, err := hardening.ReadKeys(e.StateDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	stored, err := hardening.Scan(ctx, etcdmember.SnapshotFile(snapshot), e.Inv.Cluster.Security.Encryption.EncryptedResources(), keys.Write().Name)
	if err != nil {
		return err
	}
	known := map[string]bool{hardening.Clear: true, hardening.Foreign: true}
	for _, k := range keys.Keys {
		known[k.Name] = true
	}
	var missing []string
	for _, s := range stored {
		for name, n := range s.ByKey {
			if !known[name] {
				missing = append(missing, fmt.Sprintf("%d %s under %s", n, s.Resource, name))
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("the snapshot holds %s, a key %s no longer has (retired by encryption rotate after the snapshot was taken): no API server could read them. "+
		"Put the key back in %s after the write key (from the copy kept with the snapshot), run clusterctl up so that every API server has it, then restore again",
		strings.Join(missing, ", "), file, file)
}

// scanStored scans etcd for the inventory's encrypted resources against the write key.
func scanStored(ctx context.Context, e *Env, keys *hardening.Keys) ([]hardening.Stored, error) {
	ec, err := e.etcd(ctx)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	return hardening.Scan(ctx, ec, e.Inv.Cluster.Security.Encryption.EncryptedResources(), keys.Write().Name)
}

// encryptStored has every object of the encrypted resources that is not under the write key stored again
// (hardening.Rewrite), and checks that none is left. It returns how many it rewrote.
func (d *deployment) encryptStored(ctx context.Context, play string) (int, error) {
	keys, err := loadKeys(d.e)
	if err != nil {
		return 0, err
	}
	stored, err := scanStored(ctx, d.e, keys)
	if err != nil {
		return 0, err
	}
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, s := range stored {
		if s.Current() {
			continue
		}
		ri, err := admin.Resource(s.Resource)
		if err != nil {
			return total, err
		}
		d.e.say(play, "", "%s: %d of %d objects not under key %s (%s): storing them again", s.Resource, len(s.Stale), s.Objects, keys.Write().Name, s.Keys())
		n, err := hardening.Rewrite(ctx, ri, s.Stale)
		total += n
		if err != nil {
			return total, err
		}
	}
	if total == 0 {
		return 0, nil
	}
	after, err := scanStored(ctx, d.e, keys)
	if err != nil {
		return total, err
	}
	for _, s := range after {
		if !s.Current() {
			return total, fmt.Errorf("%s: %d objects are still not under key %s after they were stored again (%s): is an API server without the encryption configuration still running? clusterctl up rolls each control-plane node to it",
				s.Resource, len(s.Stale), keys.Write().Name, s.Keys())
		}
	}
	d.e.say(play, "", "%d objects stored again under key %s", total, keys.Write().Name)
	return total, nil
}

// encryption is up's step: what was written before encryption was on, or under an older key, stored again.
func (u *upRun) encryption(ctx context.Context) error {
	_, err := u.encryptStored(ctx, "encryption")
	return err
}

// EncryptionRotateOptions tune encryption rotate.
type EncryptionRotateOptions struct {
	Timeout time.Duration // per node, for its static Pods to come back ready
	Now     func() time.Time
	// DryRun says which stages a run would apply, and how many objects it would store again; nothing
	// changes on the hosts or in the state directory.
	DryRun bool
}

// EncryptionRotateResult is what a key rotation did.
type EncryptionRotateResult struct {
	// Old are the keys retired; New the write key now.
	Old []string `json:"old"`
	New string   `json:"new"`
	// Resumed says the run finished a rotation an earlier run began.
	Resumed bool `json:"resumed"`
	// Plan is a dry run's: each stage, and why it would be skipped.
	Plan []PlannedStage `json:"plan,omitempty"`
	// Rewritten counts the objects stored again under the new key.
	Rewritten int           `json:"rewritten"`
	Stages    []PhaseTiming `json:"stages"`
}

// RotateEncryption replaces the encryption key, without a moment where an API server cannot read what
// another wrote, in up to four stages, each applied to every control-plane node one at a time (API server
// ready before the next) and each recorded in the state directory's keys before it is applied, so that a
// run interrupted anywhere is finished by running it again:
//
//  1. read:    the new key is added after the write key: every API server can decrypt with it (left out
//     with one control-plane node: there is no other API server to read what it writes);
//  2. write:   the new key comes first: every API server encrypts with it;
//  3. rewrite: every object of the encrypted resources is stored again, under the new key, and etcd is
//     read to check that nothing is left under another;
//  4. retire:  the old keys leave the configuration.
func RotateEncryption(ctx context.Context, e *Env, o EncryptionRotateOptions) (*EncryptionRotateResult, error) {
	orDefault(&o.Timeout, defaultWait)
	o.Now = clockOr(o.Now)
	keys, err := loadKeys(e)
	if err != nil {
		return nil, err
	}
	d, p, err := newDeployment(e, clusterHosts(ctx, e), deployOptions{Now: o.Now, Timeout: o.Timeout})
	if err != nil {
		return nil, err
	}
	res := &EncryptionRotateResult{Old: []string{}, Stages: []PhaseTiming{}}
	r := &keyRotation{d: d, keys: keys, res: res, single: len(e.Inv.ControlPlanes()) == 1}
	if len(keys.Keys) > 1 {
		res.Resumed = true
	} else {
		k, err := hardening.NewKey(o.Now(), rand.Reader)
		if err != nil {
			return nil, err
		}
		if k.Name == keys.Write().Name {
			return nil, fmt.Errorf("the new key would have the name of the current one (%s): rotate again in a second", k.Name)
		}
		keys.Keys = append(keys.Keys, k)
	}
	newest := keys.Newest()
	res.New = newest.Name
	for _, k := range keys.Keys {
		if k.Name != newest.Name {
			res.Old = append(res.Old, k.Name)
		}
	}
	if o.DryRun {
		return res, r.plan(ctx)
	}
	_, err = runSteps(ctx, runOptions{Sink: e.Sink}, p, []Step{
		{Name: "preflight", Plan: func(ctx context.Context, p *plan) (*plan, error) {
			_, p, err := d.preflight(ctx, p, PreflightOptions{})
			return p, err
		}},
		{Name: "read", Run: r.read, Skip: unless(r.pastRead)},
		{Name: "write", Run: r.write},
		{Name: "rewrite", Run: do(r.rewrite)},
		{Name: "retire", Run: r.retire},
	})
	return res, err
}

// PlannedStage is a stage of a dry run's rotation: Skip says why a run would not apply it ("" applies it).
type PlannedStage struct {
	Name string `json:"name"`
	Skip string `json:"skip,omitempty"`
}

// plan is a dry run's rotation: the stages, and the objects the rewrite would store again (those not
// under the new key: all of them, until it writes).
func (r *keyRotation) plan(ctx context.Context) error {
	for _, s := range []struct {
		name string
		skip func() string
	}{{"read", r.pastRead}, {"write", nil}, {"rewrite", nil}, {"retire", nil}} {
		p := PlannedStage{Name: s.name}
		if s.skip != nil {
			p.Skip = s.skip()
		}
		r.res.Plan = append(r.res.Plan, p)
	}
	newest := *r.keys
	newest.Keys = []hardening.Key{r.keys.Newest()}
	stored, err := scanStored(ctx, r.d.e, &newest)
	if err != nil {
		return err
	}
	for _, s := range stored {
		r.res.Rewritten += len(s.Stale)
	}
	return nil
}

// keyRotation is one encryption rotate.
type keyRotation struct {
	d      *deployment
	keys   *hardening.Keys
	res    *EncryptionRotateResult
	single bool
}

// pastRead skips the read stage once the new key writes (a resumed run), or with one API server.
func (r *keyRotation) pastRead() string {
	switch {
	case r.keys.Write().Name == r.res.New:
		return "the new key writes already"
	case r.single:
		return "one control-plane node: no other API server needs to read the new key first"
	}
	return ""
}

// read puts the new key after the write key on every API server.
func (r *keyRotation) read(ctx context.Context, p *plan) error {
	return r.apply(ctx, p, "read", r.keys)
}

// write puts the new key first on every API server.
func (r *keyRotation) write(ctx context.Context, p *plan) error {
	k := r.keys
	i := slices.IndexFunc(k.Keys, func(key hardening.Key) bool { return key.Name == r.res.New })
	k.Keys = append([]hardening.Key{k.Keys[i]}, slices.Delete(slices.Clone(k.Keys), i, i+1)...)
	return r.apply(ctx, p, "write", k)
}

// rewrite stores every object again under the new key.
func (r *keyRotation) rewrite(ctx context.Context) error {
	start := time.Now()
	n, err := r.d.encryptStored(ctx, "rewrite")
	r.res.Rewritten = n
	if err != nil {
		return err
	}
	r.res.Stages = append(r.res.Stages, PhaseTiming{Name: "rewrite", DurationMS: time.Since(start).Milliseconds()})
	return nil
}

// retire leaves only the new key. The rewrite before it read etcd and found every object under the new
// key (it fails otherwise, and the old keys are kept).
func (r *keyRotation) retire(ctx context.Context, p *plan) error {
	r.keys.Keys = r.keys.Keys[:1]
	return r.apply(ctx, p, "retire", r.keys)
}

// apply records keys in the state directory, then renders and rolls every control-plane node to them.
func (r *keyRotation) apply(ctx context.Context, p *plan, play string, keys *hardening.Keys) error {
	start := time.Now()
	if err := hardening.SaveKeys(r.d.e.StateDir, keys); err != nil {
		return err
	}
	d := r.d
	p, err := d.render(ctx, p)
	if err != nil {
		return err
	}
	if err := d.prepare(p); err != nil {
		return err
	}
	roll := d.cpRoll(p, play, false)
	for _, h := range d.e.Inv.ControlPlanes() {
		if _, err := roll.node(ctx, h); err != nil {
			return err
		}
	}
	if err := roll.settle(ctx); err != nil {
		return err
	}
	r.res.Stages = append(r.res.Stages, PhaseTiming{Name: play, DurationMS: time.Since(start).Milliseconds()})
	return nil
}
