// Package snapshots is etcd's scheduled snapshots (cluster.etcd.snapshots): on every etcd member a systemd
// timer and a oneshot service of clusterctl's that run a script with the artifacts' etcdctl and etcdutl
// (no daemon); and what lists and fetches the snapshots they made.
package snapshots

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/templates"
	"github.com/clusterctl/clusterctl/transport"
)

// The files on each member.
const (
	// Script takes one snapshot: templates/files/etcd-snapshot.
	Script = "/usr/local/lib/clusterctl/etcd-snapshot"
	// TimerName and ServiceName are its units.
	TimerName   = "clusterctl-etcd-snapshot.timer"
	ServiceName = "clusterctl-etcd-snapshot.service"
	TimerPath   = "/etc/systemd/system/" + TimerName
	ServicePath = "/etc/systemd/system/" + ServiceName
)

// Paths are the member's files of the schedule, its units first.
var Paths = []string{ServicePath, TimerPath, Script}

// NameRE is a snapshot's file name: its time, UTC, to the second (names sort as times do).
var NameRE = regexp.MustCompile(`^etcd-snapshot-[0-9]{8}T[0-9]{6}Z\.db$`)

// Files are the member's files for the schedule s.
func Files(s *inventory.EtcdSnapshots) ([]transport.File, error) {
	script, err := scriptFor(path.Join(kubeadm.PKIDir, "etcd"), kubeadm.Binary("etcdctl"), kubeadm.Binary("etcdutl"))
	if err != nil {
		return nil, err
	}
	command, err := templates.UnitArgs([]string{Script, s.Dir, strconv.Itoa(s.Keep)})
	if err != nil {
		return nil, err
	}
	service, err := templates.Render("etcd-snapshot.service", map[string]string{"Command": command})
	if err != nil {
		return nil, err
	}
	timer, err := templates.Render("etcd-snapshot.timer", map[string]string{"Schedule": s.Schedule})
	if err != nil {
		return nil, err
	}
	return []transport.File{{Path: ServicePath, Data: service, Mode: 0o644}, {Path: TimerPath, Data: timer, Mode: 0o644},
		{Path: Script, Data: script, Mode: 0o755}}, nil
}

// scriptFor is the snapshot script with the member's etcd PKI directory and etcd's tools where they are.
func scriptFor(pki, etcdctl, etcdutl string) ([]byte, error) {
	return templates.Render("etcd-snapshot", map[string]string{"PKI": pki, "Etcdctl": etcdctl, "Etcdutl": etcdutl,
		"Endpoint": fmt.Sprintf("https://127.0.0.1:%d", kubeadm.PortEtcdClient)})
}

// ListScript prints a member's snapshots in dir and its schedule's state (ParseList reads it).
func ListScript(dir string) (string, error) {
	b, err := templates.Render("etcd-snapshots-list.sh", map[string]string{"Dir": dir, "Pattern": NameRE.String(),
		"Timer": TimerPath, "TimerName": TimerName, "ServiceName": ServiceName})
	return string(b), err
}

// Snapshot is one scheduled snapshot on a member.
type Snapshot struct {
	Name  string    `json:"name"`
	Size  int64     `json:"size"`
	Taken time.Time `json:"taken"`
}

// State is a member's scheduled snapshots and its schedule's state.
type State struct {
	// Snapshots, newest first.
	Snapshots []Snapshot `json:"snapshots"`
	// Timer is the timer's state (active, inactive, failed); empty: no schedule on the host.
	Timer string `json:"timer,omitempty"`
	// Next is when it fires next; LastResult the last run's result (success, exit-code, ...) and LastRun
	// when it ended, as systemd says them.
	Next       string `json:"next,omitempty"`
	LastResult string `json:"lastResult,omitempty"`
	LastRun    string `json:"lastRun,omitempty"`
}

// ParseList reads ListScript's output: lines it does not know, names that are not snapshots' and numbers
// that are not numbers are left out.
func ParseList(out string) State {
	var st State
	printable := func(s string) string {
		if len(s) > 100 || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return ""
		}
		return s
	}
	for _, line := range strings.Split(out, "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "snapshot":
			f := strings.Fields(rest)
			if len(f) != 3 || !NameRE.MatchString(f[0]) {
				continue
			}
			size, err1 := strconv.ParseInt(f[1], 10, 64)
			mtime, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil || size < 0 {
				continue
			}
			st.Snapshots = append(st.Snapshots, Snapshot{Name: f[0], Size: size, Taken: time.Unix(mtime, 0).UTC()})
		case "timer":
			st.Timer = printable(rest)
		case "next":
			st.Next = printable(rest)
		case "last":
			result, at, _ := strings.Cut(rest, " ")
			st.LastResult, st.LastRun = printable(result), printable(at)
		}
	}
	sort.Slice(st.Snapshots, func(i, j int) bool { return st.Snapshots[i].Name > st.Snapshots[j].Name })
	return st
}

// Runner runs a command on a host (transport.Conn; tasks.Runner, which this package cannot import: tasks
// uses its scripts).
type Runner interface {
	Run(ctx context.Context, command string, stdin []byte) (transport.Result, error)
}

// List reads a member's snapshots in dir and its schedule's state (ListScript, ParseList).
func List(ctx context.Context, h Runner, dir string) (State, error) {
	script, err := ListScript(dir)
	if err != nil {
		return State{}, err
	}
	res, err := h.Run(ctx, "sh -s", []byte(script))
	if err != nil {
		return State{}, err
	}
	return ParseList(string(res.Stdout)), nil
}
