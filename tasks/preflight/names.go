package preflight

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// otherChecks are the checks preflight runs beside the hosts' own (playbooks.Preflight): across hosts,
// reachability, the facts and the membership mark.
var otherChecks = []string{"ClockSkew", "DuplicateNodeAddress", "NodeAddress", "Facts", "Membership", "APIServerReachable", "EtcdReachable"}

// portName is a port check of any port (the API server's is the inventory's).
var portName = regexp.MustCompile(`^(?i)port-[0-9]{1,5}$`)

// CheckNames are the names of every preflight check, as reports give them and --ignore-preflight-errors
// takes them (Port-N for any port; SSH is never ignored).
func CheckNames() []string {
	var out []string
	for _, set := range []CheckSet{SetInit, SetControlPlaneJoin, SetJoin, SetEtcd} {
		for _, etcd := range []bool{false, true} {
			n := &Node{Set: set, EtcdMember: etcd, ExternalEtcd: etcd, CIS: true}
			for _, c := range append(Checks(set, 6443, etcd), cisChecks(n)...) {
				out = append(out, c.Name)
			}
		}
	}
	out = append(out, otherChecks...)
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckIgnored refuses names of --ignore-preflight-errors that are no check's ("all" is every one).
func CheckIgnored(names []string) error {
	known := CheckNames()
	var bad []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case strings.EqualFold(n, "all"), portName.MatchString(n):
		case strings.EqualFold(n, Unignorable):
			return fmt.Errorf("--ignore-preflight-errors: %s is never ignored: a host that cannot be reached cannot be checked (leave it out with --limit or the inventory)", Unignorable)
		case !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, n) }):
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--ignore-preflight-errors: %s is no preflight check; the checks: all, %s, Port-N", strings.Join(bad, ", "), strings.Join(slices.DeleteFunc(known, portName.MatchString), ", "))
	}
	return nil
}
