// Package readiness is the report an upgrade makes before anything changes: what would block it or break
// on the way (PodDisruptionBudgets that allow no eviction on nodes it drains, APIs in use that the target
// removes, Nodes not Ready, etcd members unhealthy or with alarms, certificates that expire before it could
// end, kubelets outside the skew policy) and what only deserves a word (Nodes cordoned by someone else,
// pending certificate signing requests). Each check is a pure function of what the cluster said, so that
// each finding is tested on its own; playbooks gathers the inputs.
package readiness

import (
	"fmt"
	"slices"
	"strings"
)

// Severities: a blocker stops the run before its first change (unless --force); a warning is said.
const (
	Blocker = "blocker"
	Warning = "warning"
)

// Checks, as findings name them (and --force lists what it overrides).
const (
	CheckPDB         = "pdb"
	CheckRemovedAPI  = "removed-api"
	CheckNode        = "node"
	CheckCordoned    = "cordoned"
	CheckEtcd        = "etcd"
	CheckCSR         = "csr"
	CheckCertificate = "certificate"
	CheckSkew        = "skew"
)

// Finding is one line of the report: the object, what is wrong and what to do.
type Finding struct {
	Severity string `json:"severity"`
	Check    string `json:"check"`
	// Object names what the finding is about: "PodDisruptionBudget default/web", "Node w1", ...
	Object  string `json:"object"`
	Message string `json:"message"`
}

// Line is the finding as the report prints it.
func (f Finding) Line() string { return fmt.Sprintf("%s: %s: %s", f.Severity, f.Object, f.Message) }

func blocker(check, object, format string, args ...any) Finding {
	return Finding{Severity: Blocker, Check: check, Object: object, Message: fmt.Sprintf(format, args...)}
}

func warning(check, object, format string, args ...any) Finding {
	return Finding{Severity: Warning, Check: check, Object: object, Message: fmt.Sprintf(format, args...)}
}

// Report is every finding, blockers first, each group in a stable order.
type Report []Finding

// Sorted returns the findings blockers first, then by check and object.
func (r Report) Sorted() Report {
	out := slices.Clone(r)
	slices.SortStableFunc(out, func(a, b Finding) int {
		if a.Severity != b.Severity {
			if a.Severity == Blocker {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.Check, b.Check); c != 0 {
			return c
		}
		return strings.Compare(a.Object, b.Object)
	})
	return out
}

// Blockers are the report's blockers.
func (r Report) Blockers() Report {
	var out Report
	for _, f := range r {
		if f.Severity == Blocker {
			out = append(out, f)
		}
	}
	return out
}

// Checks are the distinct checks of the findings, sorted (what --force overrides).
func (r Report) Checks() []string {
	var out []string
	for _, f := range r {
		if !slices.Contains(out, f.Check) {
			out = append(out, f.Check)
		}
	}
	slices.Sort(out)
	return out
}
