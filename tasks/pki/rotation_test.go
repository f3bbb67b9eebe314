package pki

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRotationSwapResumes: the new CAs are made once (a second generation keeps them), the swap keeps the
// old set aside whole, and a swap interrupted after the old set was kept finishes on the next run without
// losing it.
func TestRotationSwapResumes(t *testing.T) {
	st := newStore(t, "ECDSA-P256")
	if _, _, err := st.Ensure(cluster, nodes); err != nil {
		t.Fatal(err)
	}
	oldCA := readCert(t, filepath.Join(st.Dir, "ca.crt"))
	if err := st.GenerateNewCAs(); err != nil {
		t.Fatal(err)
	}
	newCA := readCert(t, filepath.Join(st.Dir, "rotation", "new", "ca.crt"))
	if err := st.GenerateNewCAs(); err != nil {
		t.Fatal(err)
	}
	if again := readCert(t, filepath.Join(st.Dir, "rotation", "new", "ca.crt")); !again.Equal(newCA) {
		t.Fatal("a second generation replaced the new CA")
	}
	if newCA.Equal(oldCA) || newCA.Subject.CommonName != oldCA.Subject.CommonName {
		t.Fatalf("new CA %s, old %s", newCA.Subject.CommonName, oldCA.Subject.CommonName)
	}
	rot := st.NewRotation(time.Now())
	if err := rot.Begin(StageStep(StageReissue)); err != nil {
		t.Fatal(err)
	}
	// Interrupted swap: the old set kept, nothing of the new one in place yet.
	old := filepath.Join(st.rotationDir(), "old")
	for _, f := range caSetFiles() {
		if err := copyFile(filepath.Join(st.Dir, f), filepath.Join(old, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Swap(rot); err != nil {
		t.Fatal(err)
	}
	if got := readCert(t, filepath.Join(st.Dir, "ca.crt")); !got.Equal(newCA) {
		t.Error("the swap did not put the new CA in place")
	}
	if got := readCert(t, filepath.Join(old, "ca.crt")); !got.Equal(oldCA) {
		t.Error("the old CA was not kept")
	}
	saved, err := st.Rotation()
	if err != nil || saved == nil || !saved.Data.Swapped || RotationStage(saved) != StageReissue {
		t.Fatalf("rotation state after the swap: %+v, %v", saved, err)
	}
	others, err := st.Others(saved)
	if err != nil || !others.CAs["ca"].Cert.Equal(oldCA) {
		t.Fatalf("others after the swap: %v", err)
	}
	if info, err := os.Stat(filepath.Join(old, "ca.key")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the old CA key: %v %v", info, err)
	}
	// The leaves no longer match the current CA: Ensure issues them anew.
	_, changes, err := st.Ensure(cluster, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) == 0 {
		t.Error("no leaf issued anew after the swap")
	}
	if err := st.EndRotation(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.rotationDir()); !os.IsNotExist(err) {
		t.Errorf("rotation directory left: %v", err)
	}
	if rot, err := st.Rotation(); rot != nil || err != nil {
		t.Errorf("the rotation's journal is left: %+v %v", rot, err)
	}
}
