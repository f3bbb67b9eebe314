package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// BuiltFile records in a state directory that up made (or took over) its cluster: from then on, commands
// that operate a running cluster work from it. render writes the PKI and kubeconfigs into a state
// directory too, and must not make it look built.
const BuiltFile = "cluster.json"

// Built is what BuiltFile holds.
type Built struct {
	Name string `json:"name"`
	// At is when up first found the cluster's API server answering.
	At time.Time `json:"builtAt"`
}

// MarkBuilt records that dir's cluster exists (once: a later call keeps the first record).
func MarkBuilt(dir, name string, at time.Time) error {
	path := filepath.Join(dir, BuiltFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	data, err := json.Marshal(Built{Name: name, At: at.UTC()})
	if err != nil {
		return err
	}
	return WriteFile(path, append(data, '\n'), 0o600)
}

// IsBuilt reports whether up recorded dir's cluster as built; legacy names a file that, with admin.conf,
// says the same of a state directory from before the record (up's learned addresses: render writes none).
func IsBuilt(dir, legacy string) (bool, error) {
	data, err := ReadFile(filepath.Join(dir, BuiltFile), 4096)
	switch {
	case err == nil:
		var b Built
		if err := json.Unmarshal(data, &b); err != nil || b.Name == "" {
			return false, fmt.Errorf("%s: not a record of a cluster clusterctl built", filepath.Join(dir, BuiltFile))
		}
		return true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	for _, f := range []string{"admin.conf", legacy} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false, nil
		}
	}
	return true, nil
}
