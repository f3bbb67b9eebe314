package playbooks

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

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
	if st == nil && u.o.Rollback {
		return fmt.Errorf("%w: no upgrade is under way (%s): nothing to roll back", ErrUpgradeRefused, path)
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
	if st.Data.RollingBack && !u.o.Rollback {
		return fmt.Errorf("%w: the rollback of the upgrade from %s to %s was stopped half-way (%s): finish it (clusterctl upgrade --rollback) before another",
			ErrUpgradeRefused, st.Data.From, st.Key, path)
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

// isDone, current and progressOf read the journal the resuming steps (control-plane, addons, kubelets)
// write through the runner (progress): the other steps ask what a killed run left.
func (u *upgradeRun) isDone(step string) bool { return u.st.IsDone(step) }

func (u *upgradeRun) current(host string) bool { return u.st.IsCurrent(host) }

func (u *upgradeRun) progressOf(step string) progress {
	return progress{step: step, j: u.st, dry: true}
}

// interrupted are the control-plane hosts a killed run was rolling.
func (u *upgradeRun) interrupted(p *plan) []*inventory.Host {
	var out []*inventory.Host
	g := u.progressOf("control-plane")
	for _, h := range u.controlPlaneHosts(p) {
		if g.Begun(h.Name) && !g.Done(h.Name) {
			out = append(out, h)
		}
	}
	return out
}

func (u *upgradeRun) nothingToResume(p *plan) string {
	if u.limit || len(u.interrupted(p)) == 0 {
		return "no control-plane node was left half-way"
	}
	return ""
}

func (u *upgradeRun) resume(ctx context.Context, p *plan) error {
	cp := u.only(controlPlaneFile).keeping(u.keptDir(phaseControlPlane))
	for _, h := range u.interrupted(p) {
		u.e.say("resume", h.Name, "finishing its control plane, left half-way by the run that was interrupted")
		if _, err := cp.rollControlPlane(ctx, p, "resume", h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}

// rollbackSteps are upgrade --rollback's: connect (preflight's checks only said), render (the target's
// files, which say what each node runs), then the rollback of every control-plane node the upgrade under
// way changed (rollBack). An upgrade past its control planes (its add-ons done) is not rolled back.
func (u *upgradeRun) rollbackSteps() []Step {
	return []Step{
		{Name: "preflight", Plan: func(ctx context.Context, p *plan) (*plan, error) {
			o := u.o.Preflight
			o.Ignore = []string{"all"}
			report, p, err := u.preflight(ctx, p, o)
			u.res.Preflight = report
			return p, err
		}, Dry: true},
		{Name: "render", Plan: u.render, Dry: true},
		{Name: "rollback", Run: func(ctx context.Context, p *plan) error {
			if u.isDone("addons") {
				return fmt.Errorf("%w: the upgrade to %s is past its control planes (every API server and the add-ons run it): finish it (clusterctl upgrade --to %s); a rollback puts back control-plane nodes only",
					ErrUpgradeRefused, u.res.To, u.res.To)
			}
			if u.o.DryRun {
				for _, h := range slices.Backward(u.controlPlaneHosts(p)) {
					u.res.Order = append(u.res.Order, fmt.Sprintf("%s: put back what the upgrade replaced (kept in %s), static Pods at %s, if it kept anything", h.Name, u.keptDir(phaseControlPlane), u.res.From))
				}
				return nil
			}
			return u.rollBack(ctx, p, nil, nil)
		}},
	}
}
