package playbooks

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// loadState reads the journal of an upgrade under way (one to another version is refused), or starts one;
// a dry run keeps none.
func (u *upgradeRun) loadState() error {
	path := statedir.JournalPath(u.e.StateDir, kindUpgrade)
	if err := statedir.CheckLegacy(filepath.Join(u.e.StateDir, "upgrade.json"), kindUpgrade); err != nil {
		return err
	}
	st, err := statedir.OpenJournal[upgradeData](path, kindUpgrade)
	if err != nil {
		return err
	}
	if st == nil {
		if !u.o.DryRun {
			u.st = statedir.NewJournal[upgradeData](path, kindUpgrade, u.res.To, u.o.Now())
		}
		return nil
	}
	if st.Key != u.res.To {
		return fmt.Errorf("%w: an upgrade from %s to %s is under way (%s); finish it (clusterctl upgrade --to %s) before another",
			ErrUpgradeRefused, st.Data.From, st.Key, path, st.Key)
	}
	u.st = st
	for _, h := range st.Current {
		u.wasCurrent[h] = true
	}
	u.res.Resumed = true
	u.res.From = st.Data.From
	u.res.Backup = st.Data.Backup
	return nil
}

// keepFrom puts the version upgraded from, once check has found it, in a journal not written yet: its
// first change writes it. A journal that is not written (nothing changed) blocks no other upgrade.
func (u *upgradeRun) keepFrom() {
	if u.st != nil && u.st.Data.From == "" {
		u.st.Data.From = u.res.From
	}
}

func (u *upgradeRun) isDone(step string) bool { return u.st.IsDone(step) }

func (u *upgradeRun) current(host string) bool { return u.st.IsCurrent(host) }

func (u *upgradeRun) markDone(step string, hosts ...string) error {
	if u.o.DryRun {
		return nil
	}
	return u.st.MarkDone(step, hosts...)
}

func (u *upgradeRun) markCurrent(hosts ...string) error {
	if u.o.DryRun {
		return nil
	}
	return u.st.Begin(hosts...)
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
	cp := u.only(controlPlaneFile)
	for _, h := range u.interrupted() {
		u.e.say("resume", h.Name, "finishing its control plane, left half-way by the run that was interrupted")
		if _, err := cp.rollControlPlane(ctx, "resume", h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}
