// Package statedir is what clusterctl keeps in a cluster's state directory on the workstation beside the
// PKI: files written atomically, and the journals of runs under way.
//
// A journal records a long run's progress in the state directory, so that the same command, re-run after a
// kill, resumes it. Every run that cannot read its progress back from the hosts (upgrade, certs rotate --ca,
// etcd restore) keeps one journal, runs/<kind>.json, in one format:
//
//	{"kind": "upgrade", "key": "v1.37.2", "started": "...",
//	 "done": ["control-plane/cp1", "addons"], "current": ["cp2"], "data": {...}}
//
// Key says what the run is for (a target version, a snapshot): a run for another key does not resume it.
// Done are the steps finished (a step name, or step/host), Current the steps or hosts under way when it was
// written, Data what the run keeps of its own. The file is written atomically, 0600, on every change, and
// removed when the run is done. The runs that need none (up, certs rotate, remove-node, reset) find
// what is left to do on the hosts themselves.
//
// A nil *Journal is a run that records nothing (a dry run): it has done nothing, and its changes are
// dropped.
package statedir

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ReadFile reads a file of at most limit bytes (a longer one is an error naming it).
func ReadFile(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, limit)
	}
	return data, nil
}

// WriteFile writes atomically: a temporary file in the same directory (made 0700 when missing), synced,
// renamed over the target.
func WriteFile(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
