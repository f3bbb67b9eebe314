package playbooks

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/tasks/certs"
	"github.com/clusterctl/clusterctl/tasks/charts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/readiness"
	"github.com/clusterctl/clusterctl/tasks/runlock"
)

// statusWait bounds each of the status report's questions: an API server or etcd that does not answer
// within it is reported as such.
const statusWait = 5 * time.Second

// ClusterStatus is `clusterctl status`: the cluster as its API server, etcd and the state directory say.
type ClusterStatus struct {
	Nodes      []nodes.NodeHealth `json:"nodes"`
	Components []nodes.Component  `json:"components"`
	Etcd       []EtcdMember       `json:"etcd"`
	Addons     []charts.Release   `json:"addons,omitempty"`
	// Soonest is the state directory's certificate that expires first.
	Soonest *certs.Cert `json:"soonest,omitempty"`
	// PendingCSRs are certificate signing requests nobody approved or denied.
	PendingCSRs []string `json:"pendingCSRs"`
	// Lock is the run that holds the cluster's lock, if any.
	Lock *runlock.State `json:"lock,omitempty"`
	// Drift counts what up would change (files, actions, add-ons), by host ("" the add-ons): clusterctl
	// diff shows it; nil when it could not be told.
	Drift map[string]int `json:"drift"`
	// Problems make the cluster unhealthy (exit 1); Warnings deserve a look.
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings"`
}

// Status asks the API server, every etcd member and the state directory at once, each question bounded;
// what does not answer is a problem of the report, not an error.
func Status(ctx context.Context, e *Env) *ClusterStatus {
	s := &ClusterStatus{PendingCSRs: []string{}, Problems: []string{}, Warnings: []string{}}
	var wg sync.WaitGroup
	var etcdErr, addonsErr, driftErr error
	wg.Add(3)
	go func() {
		defer wg.Done()
		s.Drift, driftErr = drift(ctx, e)
	}()
	go func() {
		defer wg.Done()
		s.Etcd, etcdErr = EtcdStatus(ctx, e)
	}()
	go func() {
		defer wg.Done()
		if len(e.Inv.Cluster.Addons) > 0 {
			s.Addons, addonsErr = Addons(ctx, e)
		}
	}()
	apiErr := s.fromAPI(ctx, e)
	local, certErr := certs.Local(e.StateDir, time.Now())
	wg.Wait()
	s.judge(apiErr, etcdErr, addonsErr)
	if driftErr != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("could not tell what differs from what up would write: %v", driftErr))
	} else if n := len(s.Drift); n > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d host(s) differ from what up would write: clusterctl diff shows how", n))
	}
	switch {
	case certErr != nil:
		s.Warnings = append(s.Warnings, fmt.Sprintf("the state directory's certificates: %v", certErr))
	case len(local) > 0:
		s.Soonest = &local[0]
		s.judgeExpiry(local[0])
	}
	return s
}

// fromAPI reads the Nodes, the control plane's mirror Pods, pending CSRs and the lock.
func (s *ClusterStatus) fromAPI(ctx context.Context, e *Env) error {
	ctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	admin, err := e.Admin(ctx)
	if err != nil {
		return err
	}
	kube := admin.Kube
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	joined := map[string]bool{}
	for i := range list.Items {
		s.Nodes = append(s.Nodes, nodes.HealthOf(&list.Items[i]))
		joined[list.Items[i].Name] = true
	}
	var cps []string
	for _, h := range e.Inv.ControlPlanes() {
		if joined[h.NodeName] {
			cps = append(cps, h.NodeName)
		}
	}
	comps := []string{kubeadm.APIServer, kubeadm.ControllerManager, kubeadm.Scheduler}
	if !e.Inv.ExternalEtcd() {
		comps = append(comps, kubeadm.Etcd)
	}
	pods, err := kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane"})
	if err != nil {
		return err
	}
	s.Components = nodes.Components(pods.Items, cps, comps)
	csrs, err := kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, f := range readiness.CSRs(csrs.Items, time.Now()) {
		s.PendingCSRs = append(s.PendingCSRs, f.Object)
		s.Warnings = append(s.Warnings, f.Object+" "+f.Message)
	}
	s.Lock, err = runlock.Current(ctx, kube.CoordinationV1().Leases(runlock.LeaseNamespace))
	if err != nil {
		return err
	}
	for i := range e.Inv.Hosts {
		if h := &e.Inv.Hosts[i]; h.IsNode() && !joined[h.NodeName] {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s", h.Name, notJoined(e, h)))
		}
	}
	return nil
}

// judge lists what is wrong: what did not answer, Nodes not Ready, components not Ready, etcd members
// unhealthy, add-ons not deployed.
func (s *ClusterStatus) judge(apiErr, etcdErr, addonsErr error) {
	if apiErr != nil {
		s.Problems = append(s.Problems, fmt.Sprintf("the API server does not answer: %v", apiErr))
	}
	for _, n := range s.Nodes {
		if !n.Ready {
			s.Problems = append(s.Problems, fmt.Sprintf("Node %s is not Ready (%s)", n.Name, n.Reason))
		}
		if n.Cordoned {
			s.Warnings = append(s.Warnings, fmt.Sprintf("Node %s is cordoned", n.Name))
		}
	}
	for _, c := range s.Components {
		if !c.Ready {
			s.Problems = append(s.Problems, fmt.Sprintf("%s on %s: %s", c.Component, c.Node, c.Problem))
		}
	}
	if etcdErr != nil {
		s.Problems = append(s.Problems, fmt.Sprintf("etcd: %v", etcdErr))
	}
	for _, m := range s.Etcd {
		switch {
		case m.NotJoined:
		case m.Status == nil:
			s.Problems = append(s.Problems, fmt.Sprintf("etcd member %s does not answer: %s", m.Name, m.Error))
		case !m.Status.Healthy:
			s.Problems = append(s.Problems, fmt.Sprintf("etcd member %s is unhealthy: %v", m.Name, m.Status.Errors))
		}
	}
	if addonsErr != nil {
		s.Problems = append(s.Problems, fmt.Sprintf("add-ons: %v", addonsErr))
	}
	for _, a := range s.Addons {
		if a.Status != "deployed" {
			s.Problems = append(s.Problems, fmt.Sprintf("add-on %s is %s", a.Name, a.Status))
		}
	}
}

// judgeExpiry: an expired certificate is a problem, one within 30 days a warning.
func (s *ClusterStatus) judgeExpiry(c certs.Cert) {
	left := time.Until(c.NotAfter)
	switch {
	case left <= 0:
		s.Problems = append(s.Problems, fmt.Sprintf("certificate %s expired at %s: clusterctl certs rotate", c.Path, c.NotAfter.UTC().Format(time.RFC3339)))
	case left < 30*24*time.Hour:
		s.Warnings = append(s.Warnings, fmt.Sprintf("certificate %s expires in %s: clusterctl certs rotate", c.Path, certs.Residual(left)))
	}
}

// Healthy: nothing is wrong.
func (s *ClusterStatus) Healthy() bool { return len(s.Problems) == 0 }

// drift is up's dry run counted by host: what differs from what up would write.
func drift(ctx context.Context, e *Env) (map[string]int, error) {
	res, err := Up(ctx, e, UpOptions{DryRun: true})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range res.Plan {
		if n := len(p.Files) + len(p.Changes()); n > 0 {
			out[p.Host] = n
		}
	}
	for _, a := range res.Addons {
		if a.Action != charts.Unchanged {
			out[""]++
		}
	}
	return out, nil
}
