package playbooks

import (
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// The reboot's journal: which hosts are done, which were being rebooted, each one's boot ID before its
// reboot and when it was asked for, the nodes it cordoned (see drainWindow).

func (r *rebootRun) loadState() error {
	path := statedir.JournalPath(r.e.StateDir, kindReboot)
	st, err := statedir.OpenJournal[rebootData](path, kindReboot)
	if err != nil {
		return err
	}
	if st != nil {
		r.st, r.res.Resumed = st, true
		return nil
	}
	if !r.o.DryRun {
		r.st = statedir.NewJournal[rebootData](path, kindReboot, kindReboot, r.o.Now())
	}
	return nil
}

func (r *rebootRun) save(change func(*rebootData)) error {
	if r.st == nil {
		return nil
	}
	return r.st.Update(func(j *statedir.Journal[rebootData]) { change(&j.Data) })
}

// issuedBefore is what the journal says of a host's reboot: its boot ID before it, and when it was asked
// for (ok false: not asked for).
func (r *rebootRun) issuedBefore(h *inventory.Host) (bootID string, issued time.Time, ok bool) {
	if r.st != nil {
		r.st.View(func(j *statedir.Journal[rebootData]) {
			bootID, ok = j.Data.BootIDs[h.Name]
			issued = time.UnixMilli(j.Data.Issued[h.Name])
		})
	}
	return bootID, issued, ok
}

// isDone and wasCurrent read what the reboot step (a resuming step: progress) recorded in a run that stopped
// (a nil journal, in a dry run, reads as nothing).
func (r *rebootRun) isDone(h *inventory.Host) bool { return r.reboots().Done(h.Name) }

func (r *rebootRun) wasCurrent(h *inventory.Host) bool { return r.reboots().Begun(h.Name) }

func (r *rebootRun) reboots() progress { return progress{step: "reboot", j: r.st, dry: true} }
