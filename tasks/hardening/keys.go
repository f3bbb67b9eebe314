package hardening

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// KeysFile is the state directory's file of the cluster's encryption keys (0600).
const KeysFile = "encryption-keys.json"

// Provider is the encryption provider clusterctl configures: secretbox (XSalsa20 and Poly1305), which the
// Kubernetes documentation calls the strongest of the local-key providers; its values in etcd begin with
// k8s:enc:secretbox:v1:<key name>:.
const Provider = "secretbox"

// Key is one encryption key.
type Key struct {
	// Name is how the API server names it in what it writes (k8s:enc:secretbox:v1:<name>:).
	Name string `json:"name"`
	// Secret is the 32 random bytes of the key.
	Secret []byte `json:"secret"`
	// Created is when clusterctl made it.
	Created time.Time `json:"created"`
}

// Keys are the cluster's encryption keys: the first encrypts every write, every one decrypts (a key
// rotation keeps the old ones until nothing is encrypted with them).
type Keys struct {
	Keys []Key `json:"keys"`
}

// Write is the key the API servers encrypt with.
func (k *Keys) Write() Key { return k.Keys[0] }

// Newest is the key made last: during a rotation, the one that replaces the others.
func (k *Keys) Newest() Key {
	n := k.Keys[0]
	for _, key := range k.Keys[1:] {
		if key.Created.After(n.Created) {
			n = key
		}
	}
	return n
}

// keyNameRE is a key's name: clusterctl's are key-<UTC date>-<time>.
var keyNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// NewKey makes a key named for when it was made.
func NewKey(now time.Time, random io.Reader) (Key, error) {
	secret := make([]byte, 32)
	if _, err := io.ReadFull(random, secret); err != nil {
		return Key{}, fmt.Errorf("an encryption key: %w", err)
	}
	now = now.UTC().Truncate(time.Second)
	return Key{Name: "key-" + now.Format("20060102-150405"), Secret: secret, Created: now}, nil
}

// LoadKeys reads the state directory's keys, making the first one when there are none; created tells
// whether it did (the file is written at once, 0600).
func LoadKeys(stateDir string, now time.Time) (keys *Keys, created bool, err error) {
	keys, err = ReadKeys(stateDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return keys, false, err
	}
	k, err := NewKey(now, rand.Reader)
	if err != nil {
		return nil, false, err
	}
	keys = &Keys{Keys: []Key{k}}
	return keys, true, SaveKeys(stateDir, keys)
}

// ReadKeys reads the state directory's keys; an error wrapping fs.ErrNotExist when there are none.
func ReadKeys(stateDir string) (*Keys, error) {
	file := filepath.Join(stateDir, KeysFile)
	data, err := pki.ReadSecret(file)
	if err != nil {
		return nil, err
	}
	keys := &Keys{}
	if err := json.Unmarshal(data, keys); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return keys, keys.check(file)
}

// check refuses keys that the API server would refuse, or that are not clusterctl's.
func (k *Keys) check(file string) error {
	if len(k.Keys) == 0 {
		return fmt.Errorf("%s holds no key: remove it to make a new one, or put back the one the cluster's data is encrypted with", file)
	}
	seen := map[string]bool{}
	for _, key := range k.Keys {
		switch {
		case !keyNameRE.MatchString(key.Name):
			return fmt.Errorf("%s: %q is not a key name (lower-case letters, digits and '-', at most 63)", file, key.Name)
		case seen[key.Name]:
			return fmt.Errorf("%s: two keys are named %q", file, key.Name)
		case len(key.Secret) != 32:
			return fmt.Errorf("%s: key %q has %d bytes, not 32", file, key.Name, len(key.Secret))
		}
		seen[key.Name] = true
	}
	return nil
}

// SaveKeys writes the keys to the state directory, 0600, atomically.
func SaveKeys(stateDir string, keys *Keys) error {
	data, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return err
	}
	return statedir.WriteFile(filepath.Join(stateDir, KeysFile), append(data, '\n'), Mode)
}

// EncryptionConfig is the API servers' EncryptionConfiguration: the resources encrypted with secretbox,
// the write key first, every other key after it to read with, then identity, so that what was written in
// clear before (a cluster made before encryption) is still read until it is rewritten.
func EncryptionConfig(resources []string, keys *Keys) ([]byte, error) {
	if keys == nil || len(keys.Keys) == 0 {
		return nil, errors.New("no encryption key")
	}
	box := &apiserverv1.SecretboxConfiguration{}
	for _, k := range keys.Keys {
		box.Keys = append(box.Keys, apiserverv1.Key{Name: k.Name, Secret: base64.StdEncoding.EncodeToString(k.Secret)})
	}
	return yaml.Marshal(apiserverv1.EncryptionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: resources,
			Providers: []apiserverv1.ProviderConfiguration{{Secretbox: box}, {Identity: &apiserverv1.IdentityConfiguration{}}},
		}},
	})
}

// KeysFromConfig reads the keys back from an API server's EncryptionConfiguration (what EncryptionConfig
// wrote): the secretbox keys in their order, the write key first. A key named as clusterctl names them
// (key-<date>-<time>) was created then; another, at the zero time. Keys that are not clusterctl's are
// refused, as ReadKeys refuses them.
func KeysFromConfig(data []byte) (*Keys, error) {
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("the encryption configuration: %w", err)
	}
	keys := &Keys{}
	for _, r := range cfg.Resources {
		for _, p := range r.Providers {
			if p.Secretbox == nil || len(keys.Keys) > 0 {
				continue
			}
			for _, k := range p.Secretbox.Keys {
				secret, err := base64.StdEncoding.DecodeString(k.Secret)
				if err != nil {
					return nil, fmt.Errorf("the encryption configuration: key %q: %w", k.Name, err)
				}
				created, _ := time.Parse("20060102-150405", strings.TrimPrefix(k.Name, "key-"))
				keys.Keys = append(keys.Keys, Key{Name: k.Name, Secret: secret, Created: created})
			}
		}
	}
	return keys, keys.check("the encryption configuration")
}
