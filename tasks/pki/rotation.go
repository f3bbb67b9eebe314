package pki

import (
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// The stages of a CA rotation (certs rotate --ca). Each is applied to the whole fleet before the next starts;
// the stage being applied is recorded before anything changes on a host, so that every render (by the
// rotation itself, by a re-run after an interruption, or by up and add-node meanwhile) makes the files of
// that stage.
const (
	// StageGenerate: new CAs (cluster, front-proxy, etcd, kubelet serving) and a new service-account key
	// are made in the state directory. Nothing changes on the hosts.
	StageGenerate = 1
	// StageTrust: every trust bundle holds the old and the new CAs (ca.crt, front-proxy-ca.crt, etcd/ca.crt,
	// kubelet-serving-ca.crt, kubeconfigs, cluster-info, kube-root-ca.crt through the controller-manager's
	// root CA file), and the API server verifies service-account tokens with both keys. Everything is
	// still signed by the old ones.
	StageTrust = 2
	// StageReissue: the new CAs become the state directory's current ones (the old kept aside); every leaf
	// certificate and kubeconfig is issued anew by them, and every kubelet gets a client certificate they
	// signed. The controller-manager signs with the new CA, and the API server signs service-account tokens
	// with the new key, from their restart in this stage on.
	StageReissue = 3
	// StageSign: kubelet serving certificates are requested anew (the controller-manager signs them with the
	// new kubelet serving CA), and kubelets request new tokens, of the new key, for their Pods. The hosts' files are those
	// of the reissue stage.
	StageSign = 4
	// StageFinish: once nothing presents a certificate the old CAs signed, they leave every bundle.
	StageFinish = 5
)

// StageNames name the stages in messages and results.
var StageNames = map[int]string{StageGenerate: "generate", StageTrust: "trust", StageReissue: "reissue", StageSign: "sign", StageFinish: "finish"}

// KindCARotation is the kind of a CA rotation's journal (statedir.JournalPath of the state directory).
const KindCARotation = "ca-rotation"

// Rotation is a CA rotation under way: its journal, whose steps are the stages (StageStep), beside the new
// (or, once swapped, the old) CAs in the pki directory's rotation/.
type Rotation = statedir.Journal[RotationData]

// RotationData is what a CA rotation keeps in its journal besides its stages.
type RotationData struct {
	// Swapped: the new CAs and service-account key are the current ones (pki/), the old ones are in
	// rotation/old; before, the new ones wait in rotation/new.
	Swapped bool `json:"swapped"`
	// TrustedAt is when every namespace's kube-root-ca.crt held both CAs: Pods started later trust both.
	TrustedAt time.Time `json:"trustedAt,omitzero"`
	// TokensAt is when every running Pod's token file held a token of the new key.
	TokensAt time.Time `json:"tokensAt,omitzero"`
}

// StageStep is a stage's step name in the rotation's run and journal ("ca-trust").
func StageStep(stage int) string { return "ca-" + StageNames[stage] }

// StagesDone is the last stage of the rotation completed (0: none).
func StagesDone(r *Rotation) int {
	done := 0
	for s := StageGenerate; s <= StageFinish && r.IsDone(StageStep(s)); s++ {
		done = s
	}
	return done
}

// RotationStage is the stage being applied, or the last one completed: what every render makes the files
// of.
func RotationStage(r *Rotation) int {
	stage := 0
	for s := StageGenerate; s <= StageFinish; s++ {
		if r.IsDone(StageStep(s)) || r.IsCurrent(StageStep(s)) {
			stage = s
		}
	}
	return stage
}

// SignerName is the file name (under the pki directory, without extension) of the cluster CA the
// controller-manager signs with while a rotation is under way (SignerPath of ca).
const SignerName = "ca-signer"

// RetiredSAKeyFile keeps, after a rotation, the old service-account public key while token Secrets it signed
// remain: the API server keeps accepting them (sa.pub holds it too) until the next rotation finds none.
const RetiredSAKeyFile = "sa-retired.pub"

func (st *Store) rotationDir() string { return filepath.Join(st.Dir, "rotation") }

func (st *Store) rotationJournal() string {
	return statedir.JournalPath(filepath.Dir(st.Dir), KindCARotation)
}

// Rotation is the CA rotation under way, or nil.
func (st *Store) Rotation() (*Rotation, error) {
	if err := statedir.CheckLegacy(filepath.Join(st.rotationDir(), "state.json"), KindCARotation); err != nil {
		return nil, err
	}
	return statedir.OpenJournal[RotationData](st.rotationJournal(), KindCARotation)
}

// NewRotation starts the journal of a CA rotation.
func (st *Store) NewRotation(now time.Time) *Rotation {
	return statedir.NewJournal[RotationData](st.rotationJournal(), KindCARotation, "", now)
}

// files a CA set is made of, relative to its directory.
func caSetFiles() []string {
	var out []string
	for _, s := range CAs() {
		out = append(out, s.Path+".crt", s.Path+".key")
	}
	return append(out, "sa.key")
}

// GenerateNewCAs makes, in rotation/new, the new CAs and service-account key; what is already there is kept,
// so that an interrupted generation resumes.
func (st *Store) GenerateNewCAs() error {
	if err := checkDir(st.Dir); err != nil {
		return err
	}
	dir := filepath.Join(st.rotationDir(), "new")
	for _, s := range CAs() {
		if _, err := os.Stat(filepath.Join(dir, s.Path+".key")); err == nil {
			continue
		}
		cur, err := st.load(s.Path)
		if err != nil {
			return fmt.Errorf("the current %s (a CA rotation needs its key): %w", s.Name, err)
		}
		kp, err := st.Issuer.NewCA(Spec{Name: s.Name, CommonName: cur.Cert.Subject.CommonName, Organization: cur.Cert.Subject.Organization})
		if err != nil {
			return err
		}
		if err := (&Store{Dir: dir}).write(s.Path, kp); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sa.key")); err == nil {
		return nil
	}
	key, err := GenerateKey(st.Issuer.Algorithm)
	if err != nil {
		return err
	}
	data, err := EncodeKey(key)
	if err != nil {
		return err
	}
	return statedir.WriteFile(filepath.Join(dir, "sa.key"), data, 0o600)
}

// Swap makes the new CAs and service-account key the current ones: the current set is first copied, whole,
// to rotation/old (a temporary directory renamed into place), then the new files replace the current ones one
// by one. Re-running an interrupted swap finishes it.
func (st *Store) Swap(r *Rotation) error {
	if r.Data.Swapped {
		return nil
	}
	old := filepath.Join(st.rotationDir(), "old")
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		tmp := old + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
		for _, f := range caSetFiles() {
			if err := copyFile(filepath.Join(st.Dir, f), filepath.Join(tmp, f)); err != nil {
				return err
			}
		}
		if err := syncDir(tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, old); err != nil {
			return err
		}
	}
	for _, f := range caSetFiles() {
		if err := copyFile(filepath.Join(st.rotationDir(), "new", f), filepath.Join(st.Dir, f)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(st.rotationDir(), "new")); err != nil {
		return err
	}
	return r.Update(func(r *Rotation) { r.Data.Swapped = true })
}

// Others are the CAs and service-account key on the other side of a rotation: the new ones before the swap,
// the old ones after.
type Others struct {
	CAs map[string]*KeyPair
	SA  crypto.Signer
}

// Others loads the other side of the rotation r.
func (st *Store) Others(r *Rotation) (*Others, error) {
	dir := filepath.Join(st.rotationDir(), "new")
	if r.Data.Swapped {
		dir = filepath.Join(st.rotationDir(), "old")
	}
	o := &Others{CAs: map[string]*KeyPair{}}
	sub := &Store{Dir: dir}
	for _, s := range CAs() {
		kp, err := sub.load(s.Path)
		if err != nil {
			return nil, fmt.Errorf("CA rotation: %w", err)
		}
		o.CAs[s.Name] = kp
	}
	sa, err := sub.readKey("sa.key")
	if err != nil {
		return nil, fmt.Errorf("CA rotation: %w", err)
	}
	o.SA = sa
	return o, nil
}

// RetiredSAKey is the service-account public key kept after the last rotation, or nil.
func (st *Store) RetiredSAKey() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(st.Dir, RetiredSAKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// SetRetiredSAKey keeps (pub, PEM) or forgets (nil) the retired service-account public key.
func (st *Store) SetRetiredSAKey(pub []byte) error {
	p := filepath.Join(st.Dir, RetiredSAKeyFile)
	if pub != nil {
		return statedir.WriteFile(p, pub, 0o644)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// EndRotation closes a finished rotation: the old CAs and keys are deleted, then its journal.
func (st *Store) EndRotation() error {
	if err := os.RemoveAll(st.rotationDir()); err != nil {
		return err
	}
	if err := os.Remove(st.rotationJournal()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Load reads the current CAs and service-account key (no leaves).
func (st *Store) Load() (*PKI, error) {
	p := &PKI{CAs: map[string]*KeyPair{}}
	for _, s := range CAs() {
		kp, err := st.load(s.Path)
		if err != nil {
			return nil, err
		}
		p.CAs[s.Name] = kp
	}
	sa, err := st.readKey("sa.key")
	if err != nil {
		return nil, err
	}
	p.SA = sa
	return p, nil
}

// copyFile copies src to dst atomically, keeping src's mode.
func copyFile(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return statedir.WriteFile(dst, data, info.Mode().Perm())
}

func syncDir(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
