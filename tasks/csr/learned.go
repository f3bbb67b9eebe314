package csr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// LearnedFile keeps, in the state directory, the addresses learned from each host (those its facts report
// beside what the inventory gives it: the other family of a dual-stack host, the address of a host named
// by DNS), each recorded the first time it is learned. Later runs on some of the hosts (add-node, --limit)
// know the others' addresses from it: a joining host that reports one is refused a serving certificate
// for it.
const LearnedFile = "learned-addresses.json"

// maxLearnedFile bounds the file read back (a few addresses per host).
const maxLearnedFile = 4 << 20

// Learned are the addresses learned from each host, by host name, in the order first learned.
type Learned map[string][]string

// LoadLearned reads the state directory's record (none yet: an empty one).
func LoadLearned(stateDir string) (Learned, error) {
	path := filepath.Join(stateDir, LearnedFile)
	data, err := statedir.ReadFile(path, maxLearnedFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Learned{}, nil
	}
	if err != nil {
		return nil, err
	}
	l := Learned{}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for host, addrs := range l {
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a); err != nil || ip.Zone() != "" || ip.String() != a {
				return nil, fmt.Errorf("%s: host %q: %q is not an IP address in canonical form", path, host, a)
			}
		}
	}
	return l, nil
}

// Save writes the record to the state directory (0600, atomically).
func (l Learned) Save(stateDir string) error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return statedir.WriteFile(filepath.Join(stateDir, LearnedFile), append(data, '\n'), 0o600)
}

// Learn records, the first time, each address learned from a host of this run (learned, by host: its
// addresses in the cluster, comma separated) that the inventory does not give it. An address the
// inventory gives another host, or recorded for another host, is not recorded: it is returned, named, as
// a conflict (CheckServing refuses it). It reports whether the record changed.
func (l Learned) Learn(inv *inventory.Inventory, learned map[string]inventory.NodeAddrs) (changed bool, conflicts []string) {
	written := map[string]string{} // address -> the host the inventory gives it to
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		for _, a := range append(strings.Split(h.InternalAddress, ","), h.Address) {
			if a = canonical(a); a != "" {
				written[a] = h.Name
			}
		}
	}
	recorded := map[string]string{}
	for host, addrs := range l {
		for _, a := range addrs {
			recorded[a] = host
		}
	}
	reports := map[string][]string{} // host -> the addresses it reports, canonical
	now := map[string][]string{}     // address -> the hosts of this run that report it
	for _, host := range slices.Sorted(maps.Keys(learned)) {
		for _, ip := range learned[host] {
			a := canonical(ip.String())
			reports[host] = append(reports[host], a)
			now[a] = append(now[a], host)
		}
	}
	for _, host := range slices.Sorted(maps.Keys(reports)) {
		for _, a := range reports[host] {
			others := slices.DeleteFunc(slices.Clone(now[a]), func(o string) bool { return o == host })
			owner, inInventory := written[a]
			first, isRecorded := recorded[a]
			switch {
			case inInventory && owner == host, isRecorded && first == host:
			case inInventory:
				conflicts = append(conflicts, fmt.Sprintf("host %s reports %s, which the inventory gives host %s", host, a, owner))
			case isRecorded:
				conflicts = append(conflicts, fmt.Sprintf("host %s reports %s, which was learned from host %s at an earlier run (%s)", host, a, first, LearnedFile))
			case len(others) > 0:
				conflicts = append(conflicts, fmt.Sprintf("host %s reports %s, which host %s reports too", host, a, strings.Join(others, " and host ")))
			default:
				l[host] = append(l[host], a)
				recorded[a] = host
				changed = true
			}
		}
	}
	return changed, conflicts
}

// Forget drops what was learned from hosts that leave the cluster; it reports whether the record changed.
func (l Learned) Forget(hosts ...string) bool {
	changed := false
	for _, h := range hosts {
		if _, ok := l[h]; ok {
			delete(l, h)
			changed = true
		}
	}
	return changed
}
