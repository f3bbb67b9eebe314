package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// JournalDir is the directory of the journals, under the state directory.
const JournalDir = "runs"

// JournalPath is the journal of a kind of run in a state directory.
func JournalPath(stateDir, kind string) string {
	return filepath.Join(stateDir, JournalDir, kind+".json")
}

// Journal is a run's journal, with data of type T.
type Journal[T any] struct {
	Kind    string    `json:"kind"`
	Key     string    `json:"key,omitempty"`
	Started time.Time `json:"started"`
	Done    []string  `json:"done,omitempty"`
	Current []string  `json:"current,omitempty"`
	Data    T         `json:"data"`

	path string
	mu   sync.Mutex
}

// NewJournal starts the journal of a run (written at its first change).
func NewJournal[T any](path, kind, key string, now time.Time) *Journal[T] {
	return &Journal[T]{Kind: kind, Key: key, Started: now.UTC(), path: path}
}

// OpenJournal reads the journal at path: nil and no error when there is none.
func OpenJournal[T any](path, kind string) (*Journal[T], error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &Journal[T]{path: path}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Kind != kind {
		return nil, fmt.Errorf("%s: the journal of a %q run, not of %q (written by another version of clusterctl? finish the run with it, or remove the file)", path, r.Kind, kind)
	}
	return r, nil
}

// CheckLegacy refuses to start a run over the record an earlier clusterctl kept at path for a run of this
// kind under way (before journals): it is not read, and must not be ignored.
func CheckLegacy(path, kind string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s: an earlier clusterctl recorded a %s under way here; finish it with that build, or remove the file to start over", path, kind)
	}
	return nil
}

// Path is where the journal is kept.
func (r *Journal[T]) Path() string { return r.path }

// IsDone reports whether a step is done.
func (r *Journal[T]) IsDone(step string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.Done, step)
}

// IsCurrent reports whether a step or host was under way.
func (r *Journal[T]) IsCurrent(name string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.Current, name)
}

// View reads the journal under its lock (nothing on a nil journal).
func (r *Journal[T]) View(read func(*Journal[T])) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	read(r)
}

// Update changes the journal and writes it.
func (r *Journal[T]) Update(change func(*Journal[T])) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	change(r)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(r.path, append(data, '\n'), 0o600)
}

// Begin records names (a step, hosts) as under way.
func (r *Journal[T]) Begin(names ...string) error {
	return r.Update(func(r *Journal[T]) {
		for _, n := range names {
			if !slices.Contains(r.Current, n) {
				r.Current = append(r.Current, n)
			}
		}
	})
}

// MarkDone records a step as done, and names (the step itself, hosts) no longer under way.
func (r *Journal[T]) MarkDone(step string, names ...string) error {
	return r.Update(func(r *Journal[T]) {
		if !slices.Contains(r.Done, step) {
			r.Done = append(r.Done, step)
		}
		r.Current = slices.DeleteFunc(r.Current, func(n string) bool { return n == step || slices.Contains(names, n) })
	})
}

// Remove removes the journal of a finished run.
func (r *Journal[T]) Remove() error {
	if r == nil {
		return nil
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
