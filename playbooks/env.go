// Package playbooks sequences clusterctl's work: each playbook is an ordered list of plays, and a play says
// which hosts, how many at once, what failure it tolerates, and which task runs on each.
package playbooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/transport"
)

// Env is what every play works with: the inventory, the hosts acted on, connections, and where events go.
type Env struct {
	Inv    *inventory.Inventory
	Hosts  []*inventory.Host // the hosts acted on (--limit), in inventory order
	Dialer *transport.Dialer
	Forks  int
	Sink   transport.Sink
	Log    *slog.Logger

	mu    sync.Mutex
	conns map[string]*transport.Conn
}

// Conn returns the open connection to a host, or nil.
func (e *Env) Conn(name string) *transport.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conns[name]
}

// Close closes every connection.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		c.Close()
	}
	e.conns = nil
}

// TargetFor is how to reach an inventory host. User and port left at their defaults in the inventory are
// left empty, so that ~/.ssh/config can supply them (root and 22 otherwise).
func TargetFor(inv *inventory.Inventory, h *inventory.Host) transport.Target {
	t := transport.Target{
		Name:          h.Name,
		Address:       h.Address,
		Port:          inv.ExplicitPort(h),
		User:          inv.ExplicitUser(h),
		IdentityFiles: h.SSH.IdentityFiles,
		HostKey:       h.SSH.HostKey,
		Become:        h.SSH.Become,
	}
	if len(t.IdentityFiles) == 0 {
		t.IdentityFiles = inv.SSH.IdentityFiles
	}
	if t.Become == nil {
		t.Become = inv.SSH.Become
	}
	bastions := h.SSH.Bastions
	if len(bastions) == 0 {
		bastions = inv.SSH.Bastions
	}
	for _, b := range bastions {
		hop := transport.Hop{Address: b.Address, Port: b.Port, User: b.User, IdentityFiles: b.IdentityFiles, HostKey: b.HostKey}
		if hop.User == "" {
			hop.User = inv.ExplicitUser(h)
		}
		if len(hop.IdentityFiles) == 0 {
			hop.IdentityFiles = t.IdentityFiles
		}
		t.Bastions = append(t.Bastions, hop)
	}
	return t
}

// Connect opens a connection to each host not connected yet, at most Forks at once. maxFail is the fraction
// of hosts that may be unreachable before the play fails.
func Connect(ctx context.Context, e *Env, hosts []*inventory.Host, maxFail float64) ([]transport.HostResult, error) {
	e.mu.Lock()
	if e.conns == nil {
		e.conns = map[string]*transport.Conn{}
	}
	e.mu.Unlock()
	byName := map[string]*inventory.Host{}
	names := make([]string, 0, len(hosts))
	for _, h := range hosts {
		byName[h.Name] = h
		names = append(names, h.Name)
	}
	return transport.Fanout(ctx, "connect", names, transport.Policy{Limit: e.Forks, MaxFail: maxFail}, e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			if e.Conn(name) != nil {
				return false, nil
			}
			c, err := e.Dialer.Dial(ctx, TargetFor(e.Inv, byName[name]))
			if err != nil {
				return false, err
			}
			e.mu.Lock()
			e.conns[name] = c
			e.mu.Unlock()
			return false, nil
		})
}

// EnsureStateDir creates the state directory (0700) or checks an existing one. A directory that others can
// read or enter is refused, as ssh refuses a private key with loose permissions: it holds the cluster's keys.
func EnsureStateDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		return os.Mkdir(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("state directory %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("state directory %s has mode %04o: it holds the cluster's private keys and must not be accessible by others (chmod 700 %s)", dir, st.Mode().Perm(), dir)
	}
	return nil
}
