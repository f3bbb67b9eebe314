package playbooks

import (
	"context"
	"crypto/x509"
	"slices"
	"time"

	"github.com/clusterctl/clusterctl/tasks/render"
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
}

// RotateResult is what a rotation renewed, and how long each control-plane node took.
type RotateResult struct {
	Renewed []string      `json:"renewed"`
	Nodes   []PhaseTiming `json:"nodes"`
	// Serving are the nodes whose kubelet requested a new serving certificate (approved and issued).
	Serving []string `json:"serving"`
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
	d, err := newDeployment(e, allHosts(e.Inv), deployOptions{Now: o.Now, Timeout: o.Timeout,
		Renew: &render.Renewal{IssuedBefore: o.Now().Add(-o.Fresh), NewKeys: o.NewKeys, Only: o.Only}})
	if err != nil {
		return nil, err
	}
	res := &RotateResult{Renewed: []string{}, Serving: []string{}}
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
