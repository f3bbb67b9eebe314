package playbooks

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// RotateOptions tune certs rotate.
type RotateOptions struct {
	// Fresh is the age under which a certificate is left alone, so that a second rotation right after the
	// first changes nothing (the command's default is 24h; 0 renews everything).
	Fresh   time.Duration
	NewKeys bool
	Only    []string
	Timeout time.Duration // per node, for its static Pods to come back ready
	// MaxUnavailable is how many workers' kubelets restart at once for their new serving certificates (0
	// is 1; control-plane nodes one at a time): each batch's Nodes and the Pods Ready on them before are
	// Ready again before the next.
	MaxUnavailable int
	Now            func() time.Time
	// DryRun renews a copy of the PKI (made in the state directory, removed after) and finds, per host,
	// the files the rotation would change and what would restart; nothing changes on the hosts or in the
	// state directory.
	DryRun bool
}

// RotateResult is what a rotation renewed, and how long each control-plane node took.
type RotateResult struct {
	Renewed []string      `json:"renewed"`
	Nodes   []PhaseTiming `json:"nodes"`
	// Serving are the nodes whose kubelet requested a new serving certificate (approved and issued).
	Serving []string `json:"serving"`
	// Plan is what a dry run found would change on each host.
	Plan []HostPlan `json:"plan,omitempty"`
}

// ServingName names the kubelet serving certificates in --only.
const ServingName = "kubelet-serving"

// RotateCerts renews the control-plane leaf certificates and kubeconfigs in the state directory (keys kept
// unless NewKeys), then, one control-plane node at a time, pushes the node's files (its static Pod manifests
// carry a digest of its certificates, so the kubelet restarts etcd and the control plane with the new ones;
// its kubelet restarts if kubelet.conf changed) and waits until its API server is ready before the next, and
// until its static Pods run the new manifests and are Ready before the next node's controller-manager and
// scheduler restart (cpRoll). Nodes whose certificates are fresh are left alone. Every host takes part:
// control-plane nodes for their files, every node for its kubelet serving certificate.
func RotateCerts(ctx context.Context, e *Env, o RotateOptions) (*RotateResult, error) {
	orDefault(&o.Timeout, defaultWait)
	o.Now = clockOr(o.Now)
	dopts := deployOptions{Now: o.Now, Timeout: o.Timeout, DryRun: o.DryRun, KubeletBatch: o.MaxUnavailable,
		Renew: &render.Renewal{IssuedBefore: o.Now().Add(-o.Fresh), NewKeys: o.NewKeys, Only: o.Only}}
	if o.DryRun {
		dir, err := copyPKI(e.StateDir)
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		dopts.PKIDir = dir
	}
	d, p, err := newDeployment(e, clusterHosts(ctx, e), dopts)
	if err != nil {
		return nil, err
	}
	res := &RotateResult{Renewed: []string{}, Serving: []string{}}
	if o.DryRun {
		return res, rotatePlan(ctx, p, d, o, res)
	}
	r := &rotation{deployment: d, o: o, res: res}
	_, err = runSteps(ctx, runOptions{Sink: e.Sink}, p, r.steps())
	return res, err
}

// rotation is one certs rotate: every leaf the options select renewed and rolled out. A rotation killed
// half-way is finished by running it again: what was renewed is in the state directory, and each host's
// files are compared with it.
type rotation struct {
	*deployment
	o   RotateOptions
	res *RotateResult
}

// steps are a leaf rotation's. It keeps no journal: the certificates renewed are in the state directory,
// and every host's files are compared with them, so running it again finishes a rotation killed half-way.
func (r *rotation) steps() []Step {
	return []Step{
		{Name: "preflight", Plan: r.preflightStep},
		{Name: "render", Plan: r.renderStep},
		{Name: "rotate", Run: r.rotate},
		// Kubelet serving certificates are the controller-manager's to sign: the kubelets request them anew.
		{Name: "serving", Skip: unless(r.noServing), Run: r.serving},
	}
}

func (r *rotation) preflightStep(ctx context.Context, p *plan) (*plan, error) {
	_, p, err := r.preflight(ctx, p, PreflightOptions{})
	return p, err
}

// renderStep renews the certificates in the state directory and renders every host's files with them.
func (r *rotation) renderStep(ctx context.Context, p *plan) (*plan, error) {
	p, err := r.render(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, ch := range p.rendered.Changes {
		r.res.Renewed = append(r.res.Renewed, ch.What)
	}
	return p, r.prepare(p)
}

// rotate rolls the external etcd members, then each control-plane node, one at a time.
func (r *rotation) rotate(ctx context.Context, p *plan) error {
	if err := r.rollEtcd(ctx, p, "rotate"); err != nil {
		return err
	}
	roll := r.cpRoll(p, "rotate", true)
	for _, h := range r.e.Inv.ControlPlanes() {
		start := time.Now()
		changed, err := roll.node(ctx, h)
		if err != nil {
			return err
		}
		if changed {
			r.res.Nodes = append(r.res.Nodes, PhaseTiming{Name: h.Name, DurationMS: time.Since(start).Milliseconds()})
		}
	}
	return roll.settle(ctx)
}

func (r *rotation) noServing() string {
	if len(r.o.Only) > 0 && !slices.Contains(r.o.Only, ServingName) {
		return "--only leaves them out"
	}
	return ""
}

// serving has the kubelets request new serving certificates, those issued before the rotation's freshness.
func (r *rotation) serving(ctx context.Context, p *plan) error {
	before := r.o.Now().Add(-r.o.Fresh)
	serving, err := r.renewServing(ctx, "rotate", names(p.nodes()), func(c *x509.Certificate) bool { return c == nil || c.NotBefore.Before(before) })
	r.res.Serving = append(r.res.Serving, serving...)
	return err
}

// rotatePlan is a dry run's rotation: preflight, the renewal made on the copy, each host's files compared
// with what it has.
func rotatePlan(ctx context.Context, p *plan, d *deployment, o RotateOptions, res *RotateResult) error {
	_, p, err := d.preflight(ctx, p, PreflightOptions{})
	if err != nil {
		return err
	}
	if p, err = d.render(ctx, p); err != nil {
		return err
	}
	for _, ch := range p.rendered.Changes {
		res.Renewed = append(res.Renewed, ch.What)
	}
	if err := d.prepare(p); err != nil {
		return err
	}
	if _, err := d.push(ctx, p, "plan", names(p.hosts), d.e.Forks); err != nil {
		return err
	}
	if len(o.Only) == 0 || slices.Contains(o.Only, ServingName) {
		for _, h := range p.nodes() {
			d.record(h.Name, apply.Outcome{Actions: []string{fmt.Sprintf("kubelet serving certificate requested anew if issued before %s", o.Now().Add(-o.Fresh).UTC().Format(time.RFC3339))}})
		}
	}
	res.Plan = d.hostPlans(p)
	return nil
}

// copyPKI copies the state directory's PKI, kubeconfigs and admin.conf, modes kept, into a new directory of
// it (0700), for a dry run to renew.
func copyPKI(stateDir string) (dir string, err error) {
	if dir, err = os.MkdirTemp(stateDir, ".dry-run-"); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	for _, sub := range []string{"pki", "kubeconfig", "admin.conf"} {
		err := filepath.WalkDir(filepath.Join(stateDir, sub), func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(stateDir, p)
			if err != nil {
				return err
			}
			if de.IsDir() {
				return os.MkdirAll(filepath.Join(dir, rel), 0o700)
			}
			if !de.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			info, err := de.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return statedir.WriteFile(filepath.Join(dir, rel), data, info.Mode().Perm())
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return dir, nil
}
