package hardening

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The keys read back from the configuration the API servers got are the keys it was made from.
func TestKeysFromConfig(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 5, 1, 0, time.UTC)
	a, _ := NewKey(now, bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	b, _ := NewKey(now.Add(-time.Hour), bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	keys := &Keys{Keys: []Key{a, b}}
	cfg, err := EncryptionConfig([]string{"secrets"}, keys)
	if err != nil {
		t.Fatal(err)
	}
	got, err := KeysFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Keys) != 2 || got.Write().Name != a.Name || !bytes.Equal(got.Keys[1].Secret, b.Secret) || !got.Keys[0].Created.Equal(a.Created) {
		t.Errorf("keys read back: %+v, want %+v", got, keys)
	}
	if _, err := KeysFromConfig([]byte("kind: EncryptionConfiguration\nresources: []\n")); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("a configuration without keys: %v", err)
	}
}
