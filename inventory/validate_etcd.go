package inventory

import (
	"path"
	"regexp"
	"strings"
)

// calendarRE is what a snapshot schedule may hold: systemd's OnCalendar words, numbers and punctuation; no
// '%' (a unit's specifiers), quote, backslash or line break.
var calendarRE = regexp.MustCompile(`^[A-Za-z0-9*:,./~+-][A-Za-z0-9*:,./~+ -]{0,127}$`)

// snapshotDirRE is a snapshot directory: an absolute path of plain names.
var snapshotDirRE = regexp.MustCompile(`^(/[A-Za-z0-9._-]+){2,}$`)

// notSnapshotDirs are trees a snapshot directory may not be in: what reset removes, and what does not
// survive a reboot or is not a disk.
var notSnapshotDirs = []string{"/etc/kubernetes", "/var/lib/etcd", "/var/lib/kubelet", "/var/lib/clusterctl", "/tmp", "/run", "/var/run", "/proc", "/sys", "/dev"}

// snapshots checks the etcd members' scheduled snapshots.
func (v *validator) snapshots(s *EtcdSnapshots) {
	if s == nil {
		return
	}
	const key = "cluster.etcd.snapshots"
	if !calendarRE.MatchString(s.Schedule) {
		v.errorf(key+".schedule", "%q is not a schedule: a systemd OnCalendar expression (daily, hourly, \"*-*-* 00,12:00:00\", \"Mon..Fri 02:30\") of letters, digits, spaces and * : , . / ~ + -", s.Schedule)
	}
	if s.Keep < 1 || s.Keep > 1000 {
		v.errorf(key+".keep", "%d: each member keeps 1 to 1000 snapshots", s.Keep)
	}
	switch {
	case !snapshotDirRE.MatchString(s.Dir) || path.Clean(s.Dir) != s.Dir:
		v.errorf(key+".dir", "%q is not a snapshot directory: a clean absolute path of at least two names of letters, digits, '.', '_' and '-' (default %s)", s.Dir, DefaultSnapshotDir)
	default:
		for _, d := range notSnapshotDirs {
			if s.Dir == d || strings.HasPrefix(s.Dir, d+"/") {
				v.errorf(key+".dir", "%q is in %s (reset removes it, or it does not outlive a reboot): choose a directory of its own, such as %s", s.Dir, d, DefaultSnapshotDir)
				break
			}
		}
	}
}
