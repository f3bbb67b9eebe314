package playbooks

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
)

// clusterHosts are the inventory's hosts that are part of the running cluster, for the commands that
// operate one (certs rotate, the CA rotation, encryption, upgrade): its Nodes and its etcd hosts. A host
// the inventory lists before add-node joined it is said once and left out, with the command that joins
// it. Without an answer from the API, every host of the inventory: the run's own checks then say what
// they find.
func clusterHosts(ctx context.Context, e *Env) []*inventory.Host {
	in, _ := clusterHostsOf(ctx, e, allHosts(e.Inv), "preflight")
	return in
}

// clusterHostsOf splits hosts into those of the running cluster and those not joined yet (clusterHosts);
// the latter are said under play, unless play is "" (a report that lists them itself).
func clusterHostsOf(ctx context.Context, e *Env, hosts []*inventory.Host, play string) (in, out []*inventory.Host) {
	admin, err := e.Admin(ctx)
	if err != nil {
		return hosts, nil
	}
	// bounded: etcd status and etcd snapshots list ask this when etcd may be what is down, and an API
	// server without etcd answers a list only at its own timeout
	lctx, cancel := context.WithTimeout(ctx, nodesListWait)
	defer cancel()
	list, err := admin.Kube.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return hosts, nil
	}
	nodes := map[string]bool{}
	for _, n := range list.Items {
		nodes[n.Name] = true
	}
	in, out = partOfCluster(hosts, nodes)
	if len(out) > 0 && play != "" {
		var names []string
		for _, h := range out {
			names = append(names, h.Name)
		}
		e.say(play, "", "%s not part of the cluster yet: left out (clusterctl add-node -i %s %s joins %s)",
			strings.Join(names, ", "), e.Inv.Source, strings.Join(names, " "), them(names))
	}
	return in, out
}

// nodesListWait bounds the Node list clusterHostsOf asks for.
const nodesListWait = 5 * time.Second

// notJoined is what a report says of a host of the inventory that add-node has not joined yet.
func notJoined(e *Env, h *inventory.Host) string {
	return fmt.Sprintf("not part of the cluster yet: clusterctl add-node -i %s %s joins it", e.Inv.Source, h.Name)
}

// partOfCluster splits hosts into those of the cluster (a Node of that name, or an etcd host) and the
// others.
func partOfCluster(hosts []*inventory.Host, nodes map[string]bool) (in, out []*inventory.Host) {
	for _, h := range hosts {
		if nodes[h.NodeName] || !h.IsNode() {
			in = append(in, h)
		} else {
			out = append(out, h)
		}
	}
	return in, out
}
