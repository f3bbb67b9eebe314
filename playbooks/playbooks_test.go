package playbooks

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/transport"
)

func testEnv(roles ...[]inventory.Role) *Env {
	inv := &inventory.Inventory{}
	for i, r := range roles {
		name := []string{"cp1", "cp2", "w1", "w2"}[i]
		inv.Hosts = append(inv.Hosts, inventory.Host{Name: name, NodeName: name + ".example.com", Roles: r})
	}
	return NewEnv(EnvConfig{Inv: inv, StateDir: "/nonexistent"})
}

var (
	cp     = []inventory.Role{inventory.RoleControlPlane}
	worker = []inventory.Role{inventory.RoleWorker}
)

func stepNames(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return out
}

// Up's steps in kubeadm's order; which run in a dry run; what a run on some hosts skips. The first
// control-plane host joins every run: the API is reached through it.
func TestUpSteps(t *testing.T) {
	e := testEnv(cp, cp, worker)
	d, p, err := newDeployment(e, []*inventory.Host{e.Inv.Host("w1")}, deployOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := &upRun{deployment: d, res: &UpResult{}}
	steps := u.steps()
	want := []string{"preflight", "render", "settled", "hooks-before", "push", "etcd", "control-plane", "wait-api", "bootstrap", "control-plane-join", "join", "network", "ready", "encryption", "addons", "hooks-after", "stamp"}
	if got := stepNames(steps); !slices.Equal(got, want) {
		t.Fatalf("steps %v", got)
	}
	var dry []string
	skip := map[string]string{}
	for _, s := range steps {
		if s.Dry {
			dry = append(dry, s.Name)
		}
		if s.Skip != nil {
			skip[s.Name] = s.Skip(p)
		}
	}
	if !slices.Equal(dry, []string{"preflight", "render", "settled", "hooks-before", "push", "etcd", "control-plane", "control-plane-join", "join", "addons", "hooks-after"}) {
		t.Errorf("dry steps %v", dry)
	}
	if names(p.hosts)[0] != "cp1" || len(p.hosts) != 2 {
		t.Errorf("hosts %v", names(p.hosts))
	}
	// add-node w1: cp2 is not part of this run, w1 is.
	if skip["control-plane-join"] == "" || skip["join"] != "" || skip["etcd"] == "" {
		t.Errorf("skips %v", skip)
	}
	if len(e.Hosts) != 0 {
		t.Errorf("the session's hosts changed: %v", names(e.Hosts))
	}

	// A single control-plane host: nothing to join.
	e = testEnv(cp)
	d, p, _ = newDeployment(e, nil, deployOptions{})
	u = &upRun{deployment: d, res: &UpResult{}}
	if u.noControlPlaneJoins(p) == "" || u.noWorkers(p) == "" {
		t.Error("a one-host cluster has other control-plane hosts or workers to join")
	}
	if _, _, err := newDeployment(testEnv(worker), nil, deployOptions{}); err == nil {
		t.Error("an inventory without a control-plane host")
	}
}

// A CA rotation records the stage under way before it and the stage done after it: one that fails stops
// there, and the next run resumes at that stage, never redoing a finished one; the last one ends the
// rotation.
func TestRotationResume(t *testing.T) {
	store := &pki.Store{Dir: filepath.Join(t.TempDir(), "pki")}
	var ran []string
	boom := errors.New("boom")
	failAt := "ca-sign"
	r := &caRotation{}
	steps := r.stages()
	for i := range steps {
		name := steps[i].Name
		steps[i].Run = func(context.Context, *plan) error {
			ran = append(ran, name)
			if name == failAt {
				return boom
			}
			return nil
		}
	}
	rot := store.NewRotation(time.Now())
	_, err := runSteps(context.Background(), rotationResume(nil, rot), nil, steps)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "stage 4 (sign)") || !strings.Contains(err.Error(), "run certs rotate --ca again") {
		t.Fatalf("error %v", err)
	}
	saved, err := store.Rotation()
	if err != nil || saved == nil || pki.StagesDone(saved) != pki.StageReissue || pki.RotationStage(saved) != pki.StageSign {
		t.Fatalf("saved %+v %v", saved, err)
	}

	ran, failAt = nil, ""
	timings, err := runSteps(context.Background(), rotationResume(nil, saved), nil, steps)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []string{"ca-sign", "ca-finish"}) || len(timings) != 2 {
		t.Errorf("resumed with %v", ran)
	}
	if rot, err := store.Rotation(); err != nil || pki.StagesDone(rot) != pki.StageFinish {
		t.Errorf("the finished rotation is recorded as %+v %v", rot, err)
	}
}

// A play's policy: with MaxFail 0 (control-plane plays, push) the first failure stops new hosts from
// starting and fails the play; with 1 (preflight, reset, certificate checks) every host is tried, each
// failure reported in the results, and the play goes on.
func TestPlayPolicies(t *testing.T) {
	e := NewEnv(EnvConfig{Inv: &inventory.Inventory{}, Forks: 1})
	hosts := []string{"a", "b", "c", "d"}
	boom := errors.New("boom")
	for _, tc := range []struct {
		maxFail float64
		ran     int
		fails   bool
	}{{0, 1, true}, {1, 4, false}} {
		ran := 0
		res, err := e.play(context.Background(), Play{Name: "p", Hosts: hosts, Policy: transportPolicy(tc.maxFail),
			Run: func(context.Context, string) (bool, error) { ran++; return false, boom }})
		if (err != nil) != tc.fails || ran != tc.ran {
			t.Errorf("MaxFail %v: ran %d hosts (want %d), err %v", tc.maxFail, ran, tc.ran, err)
		}
		failed := 0
		for _, r := range res {
			if r.Err != nil {
				failed++
			}
		}
		if failed != tc.ran {
			t.Errorf("MaxFail %v: %d failures reported, want %d", tc.maxFail, failed, tc.ran)
		}
	}
}

func transportPolicy(maxFail float64) transport.Policy { return transport.Policy{MaxFail: maxFail} }
