package playbooks

import (
	"context"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/tasks/certs"
	"github.com/clusterctl/clusterctl/transport"
)

// CheckExpiration reads every certificate from every host (one command each, certificates only) and
// compares each with the state directory's copy where there is one.
func CheckExpiration(ctx context.Context, e *Env, now time.Time) ([]certs.Cert, []transport.HostResult, error) {
	results, err := Connect(ctx, e, e.Hosts, 1)
	if err != nil {
		return nil, results, err
	}
	var reachable []string
	for _, r := range results {
		if r.Err == nil {
			reachable = append(reachable, r.Host)
		}
	}
	var mu sync.Mutex
	byHost := map[string][]certs.Cert{}
	res, err := e.play(ctx, Play{Name: "certificates", Hosts: reachable, Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
		list, err := certs.Read(ctx, e.Conn(name), now)
		if err != nil {
			return false, err
		}
		node := e.Inv.Host(name).NodeName
		for i := range list {
			list[i].State = certs.CompareWithState(e.StateDir, node, &list[i])
		}
		mu.Lock()
		byHost[name] = list
		mu.Unlock()
		return false, nil
	}})
	for _, r := range results {
		if r.Err != nil {
			res = append(res, r)
		}
	}
	var all []certs.Cert
	for _, h := range e.Hosts {
		all = append(all, byHost[h.Name]...)
	}
	return all, res, err
}
