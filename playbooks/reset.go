package playbooks

import (
	"context"
	"path"

	"github.com/clusterctl/clusterctl/templates"
	"github.com/clusterctl/clusterctl/transport"
)

// Reset undoes what Up made on each host, the hosts in parallel: kubelet stopped and disabled, every
// container of the Kubernetes namespace removed, mounts, network namespaces, the cni0 bridge and pod routes,
// the KUBE- iptables chains, clusterctl's files and units, the kubelet's and etcd's state, and the binaries
// pushed from an artifacts directory. Unrelated files are left alone; image archives already imported into
// containerd are kept (a later up then imports nothing). An unreachable host is reported and the others
// are reset.
func Reset(ctx context.Context, e *Env) ([]transport.HostResult, error) {
	results, err := Connect(ctx, e, e.Hosts, 1)
	if err != nil {
		return results, err
	}
	var reachable []string
	for _, r := range results {
		if r.Err == nil {
			reachable = append(reachable, r.Host)
		}
	}
	var binaries []string
	if e.Inv.Cluster.Artifacts != "" {
		for _, b := range []string{"kubelet", "kubectl", "etcdctl"} {
			binaries = append(binaries, path.Join(binDir, b))
		}
	}
	script, err := templates.Render("reset.sh", map[string]any{"Binaries": binaries})
	if err != nil {
		return nil, err
	}
	out, err := transport.Fanout(ctx, "reset", reachable, transport.Policy{Limit: e.Forks, MaxFail: 1}, e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			_, err := e.Conn(name).Run(ctx, "sh -s", script)
			return err == nil, err
		})
	for _, r := range results {
		if r.Err != nil {
			out = append(out, r)
		}
	}
	return out, err
}
