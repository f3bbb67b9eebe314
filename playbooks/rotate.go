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
	Now     func() time.Time
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
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	dopts := deployOptions{Now: o.Now, Timeout: o.Timeout, DryRun: o.DryRun,
		Renew: &render.Renewal{IssuedBefore: o.Now().Add(-o.Fresh), NewKeys: o.NewKeys, Only: o.Only}}
	if o.DryRun {
		dir, err := copyPKI(e.StateDir)
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		dopts.PKIDir = dir
	}
	d, err := newDeployment(e, allHosts(e.Inv), dopts)
	if err != nil {
		return nil, err
	}
	res := &RotateResult{Renewed: []string{}, Serving: []string{}}
	if o.DryRun {
		return res, rotatePlan(ctx, d, o, res)
	}
	steps := []Step{
		{Name: "preflight", Run: func(ctx context.Context) error { _, err := d.preflight(ctx, PreflightOptions{}); return err }},
		{Name: "render", Run: func(ctx context.Context) error {
			if err := d.render(ctx); err != nil {
				return err
			}
			for _, ch := range d.rendered.Changes {
				res.Renewed = append(res.Renewed, ch.What)
			}
			return d.prepare()
		}},
		{Name: "rotate", Run: func(ctx context.Context) error {
			if err := d.rollEtcd(ctx, "rotate"); err != nil {
				return err
			}
			roll := d.cpRoll("rotate", true)
			for _, h := range e.Inv.ControlPlanes() {
				start := time.Now()
				changed, err := roll.node(ctx, h)
				if err != nil {
					return err
				}
				if changed {
					res.Nodes = append(res.Nodes, PhaseTiming{Name: h.Name, DurationMS: time.Since(start).Milliseconds()})
				}
			}
			return roll.settle(ctx)
		}},
		// Kubelet serving certificates are the controller-manager's to sign: the kubelets request them anew.
		{Name: "serving", Skip: func() string {
			if len(o.Only) > 0 && !slices.Contains(o.Only, ServingName) {
				return "--only leaves them out"
			}
			return ""
		}, Run: func(ctx context.Context) error {
			before := o.Now().Add(-o.Fresh)
			serving, err := d.renewServing(ctx, "rotate", names(d.nodes()), func(c *x509.Certificate) bool { return c == nil || c.NotBefore.Before(before) })
			res.Serving = append(res.Serving, serving...)
			return err
		}},
	}
	_, err = runSteps(ctx, runOptions{Sink: e.Sink}, steps)
	return res, err
}

// rotatePlan is a dry run's rotation: preflight, the renewal made on the copy, each host's files compared
// with what it has.
func rotatePlan(ctx context.Context, d *deployment, o RotateOptions, res *RotateResult) error {
	if _, err := d.preflight(ctx, PreflightOptions{}); err != nil {
		return err
	}
	if err := d.render(ctx); err != nil {
		return err
	}
	for _, ch := range d.rendered.Changes {
		res.Renewed = append(res.Renewed, ch.What)
	}
	if err := d.prepare(); err != nil {
		return err
	}
	if _, err := d.push(ctx, "plan", names(d.hosts), d.e.Forks); err != nil {
		return err
	}
	if len(o.Only) == 0 || slices.Contains(o.Only, ServingName) {
		for _, h := range d.nodes() {
			d.record(h.Name, apply.Outcome{Actions: []string{fmt.Sprintf("kubelet serving certificate requested anew if issued before %s", o.Now().Add(-o.Fresh).UTC().Format(time.RFC3339))}})
		}
	}
	res.Plan = d.hostPlans()
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
