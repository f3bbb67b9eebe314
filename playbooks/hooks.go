package playbooks

import (
	"context"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/transport"
)

// runHooks runs the inventory's hooks of a point on each of hosts that has any (connected already), forks at
// once, as the play "hooks COMMAND.WHEN": each hook's output in the events, a failure of a stop hook ends
// the play (and the command) naming the host, the hook and its stderr; one of a continue hook is said and
// the host goes on. With dry set, nothing runs: record gets, per host, what would.
func (e *Env) runHooks(ctx context.Context, p hooks.Point, hosts []*inventory.Host, dry bool, record func(host, action string)) error {
	lists := map[string][]inventory.Hook{}
	var with []string
	for _, h := range hosts {
		if l := e.Inv.HooksFor(h, p.Command, p.When); len(l) > 0 {
			lists[h.Name] = l
			with = append(with, h.Name)
		}
	}
	if len(with) == 0 {
		return nil
	}
	if dry {
		for _, name := range with {
			for _, hk := range lists[name] {
				record(name, hookAction+p.String()+": "+hk.Run)
			}
		}
		return nil
	}
	play := "hooks " + p.String()
	_, err := e.play(ctx, Play{Name: play, Hosts: with, Run: func(ctx context.Context, name string) (bool, error) {
		conn := e.Conn(name)
		if conn == nil {
			return false, transport.ErrSkipped
		}
		results, err := hooks.Run(ctx, conn, p, lists[name])
		for _, r := range results {
			out := strings.TrimSpace(r.Output)
			switch {
			case r.Err != nil && r.Hook.OnFailure == inventory.HookContinue:
				e.say(play, name, "%v (onFailure: continue)", r.Err)
			case out != "":
				e.say(play, name, "%s: %s", r.Hook.Run, out)
			default:
				e.say(play, name, "%s: done in %s", r.Hook.Run, r.Duration.Round(1e6))
			}
		}
		return len(results) > 0, err
	}})
	return err
}
