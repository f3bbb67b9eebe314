package playbooks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"

	"github.com/clusterctl/clusterctl/tasks/backup"
)

// BackupOptions say where a backup goes and to whom it is encrypted.
type BackupOptions struct {
	// Out is the directory the archive is written into.
	Out string
	// Recipients: the archive is encrypted to them; none: plain (the operator said --unencrypted).
	Recipients []age.Recipient
	Version    string
}

// BackupResult is what `clusterctl backup` wrote.
type BackupResult struct {
	File      string `json:"file"`
	Size      int64  `json:"size"`
	Encrypted bool   `json:"encrypted"`
	// Host is the member the snapshot was taken from.
	Host string `json:"host"`
	backup.Manifest
}

// Backup writes one archive of a consistent etcd snapshot (EtcdSnapshot, streamed to the workstation)
// and the state directory into o.Out: <cluster>-<UTC time>.tar.gz, .age when encrypted, 0600.
func Backup(ctx context.Context, e *Env, o BackupOptions) (*BackupResult, error) {
	now := time.Now().UTC()
	name := fmt.Sprintf("%s-%s.tar.gz", e.Inv.Cluster.Name, now.Format("20060102T150405Z"))
	if len(o.Recipients) > 0 {
		name += ".age"
	}
	out := filepath.Join(o.Out, name)
	snap := filepath.Join(o.Out, "."+name+".snapshot.db")
	defer os.Remove(snap)
	s, err := EtcdSnapshot(ctx, e, snap)
	if err != nil {
		return nil, err
	}
	m, err := backup.Write(out, snap, e.StateDir, backup.Options{Recipients: o.Recipients,
		Manifest: backup.Manifest{Cluster: e.Inv.Cluster.Name, Created: now, Revision: s.Revision, Version: o.Version}})
	if err != nil {
		return nil, fmt.Errorf("writing the backup: %w", err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return nil, err
	}
	return &BackupResult{File: out, Size: st.Size(), Encrypted: len(o.Recipients) > 0, Host: s.Host, Manifest: m}, nil
}
