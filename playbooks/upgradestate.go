package playbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
)

type upgradeState struct {
	From, To string
	Started  time.Time
	// Done are the steps finished: "control-plane/<host>", "addons", "kubelet/<host>".
	Done []string
	// Cordoned are the nodes the upgrade cordoned (it uncordons those only).
	Cordoned []string
	// Current are the hosts being changed: they may be NotReady when a killed run resumes.
	Current []string
}

func (u *upgradeRun) statePath() string { return filepath.Join(u.e.StateDir, upgradeStateFile) }

// loadState reads the record of an upgrade under way; one to another version is refused.
func (u *upgradeRun) loadState() error {
	data, err := os.ReadFile(u.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st upgradeState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%s: %w", u.statePath(), err)
	}
	if st.To != u.res.To {
		return fmt.Errorf("%w: an upgrade from %s to %s is under way (%s); finish it (clusterctl upgrade --to %s) before another",
			ErrUpgradeRefused, st.From, st.To, u.statePath(), st.To)
	}
	u.st = &st
	for _, h := range st.Current {
		u.wasCurrent[h] = true
	}
	u.res.Resumed = true
	u.res.From = st.From
	return nil
}

// saveState writes the record (atomically, 0600); a dry run writes nothing.
func (u *upgradeRun) saveState(change func(*upgradeState)) error {
	if u.o.DryRun {
		return nil
	}
	u.stMu.Lock()
	defer u.stMu.Unlock()
	if u.st == nil {
		u.st = &upgradeState{From: u.res.From, To: u.res.To, Started: u.o.Now().UTC()}
	}
	change(u.st)
	data, err := json.MarshalIndent(u.st, "", "  ")
	if err != nil {
		return err
	}
	return writeSecret(u.statePath(), append(data, '\n'))
}

func (u *upgradeRun) isDone(step string) bool {
	u.stMu.Lock()
	defer u.stMu.Unlock()
	return u.st != nil && slices.Contains(u.st.Done, step)
}

func (u *upgradeRun) markDone(step string, hosts ...string) error {
	return u.saveState(func(s *upgradeState) {
		if !slices.Contains(s.Done, step) {
			s.Done = append(s.Done, step)
		}
		s.Current = slices.DeleteFunc(s.Current, func(h string) bool { return slices.Contains(hosts, h) })
	})
}

func (u *upgradeRun) markCurrent(hosts ...string) error {
	return u.saveState(func(s *upgradeState) {
		for _, h := range hosts {
			if !slices.Contains(s.Current, h) {
				s.Current = append(s.Current, h)
			}
		}
	})
}

// interrupted are the control-plane hosts a killed run was rolling.
func (u *upgradeRun) interrupted() []*inventory.Host {
	var out []*inventory.Host
	for _, h := range u.controlPlaneHosts() {
		if u.current(h.Name) && !u.isDone("control-plane/"+h.Name) {
			out = append(out, h)
		}
	}
	return out
}

func (u *upgradeRun) nothingToResume() string {
	if u.limit || len(u.interrupted()) == 0 {
		return "no control-plane node was left half-way"
	}
	return ""
}

func (u *upgradeRun) resume(ctx context.Context) error {
	u.filter = controlPlaneFile
	defer func() { u.filter = nil }()
	for _, h := range u.interrupted() {
		u.e.say("resume", h.Name, "finishing its control plane, left half-way by the run that was interrupted")
		if _, err := u.rollControlPlane(ctx, "resume", h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}

// upgradeStateFile records, in the state directory, an upgrade under way: what is done, which nodes it
// cordoned. A re-run with the same target resumes from it; it is removed when the upgrade is done.
const upgradeStateFile = "upgrade.json"
