package runlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// FileName is the file lock's name in the state directory.
const FileName = "run.lock"

// File is a held file lock.
type File struct{ f *os.File }

// LockFile takes dir's file lock for h, at once or not at all (a HeldError naming the holder). prev is the
// holder the file names when the lock was free: a run of this state directory that ended without
// releasing it (killed), nil when the last one released it.
func LockFile(dir string, h Holder) (lock *File, prev *Holder, err error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("run lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		held := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if held == nil {
				held = &Holder{Command: "another run"}
			}
			return nil, nil, &HeldError{Holder: *held, Where: "this state directory"}
		}
		return nil, nil, fmt.Errorf("run lock %s: %w", path, err)
	}
	prev = readHolder(f)
	data, err := json.Marshal(h)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(data, '\n'), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("run lock %s: %w", path, err)
	}
	return &File{f: f}, prev, nil
}

// readHolder is the holder a lock file names, nil when it names none.
func readHolder(f *os.File) *Holder {
	data, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 4096), 4096))
	if err != nil || len(data) == 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(data, &h) != nil || h.ID == "" {
		return nil
	}
	h = h.clean()
	return &h
}

// Release empties the file (no holder: the next run finds none that died) and unlocks it.
func (l *File) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	l.Leave()
}

// Leave unlocks the file but leaves this run named in it, as a killed run does: the next run of the state
// directory takes over at once a Lease this run could not give up.
func (l *File) Leave() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
}
