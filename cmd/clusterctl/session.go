package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/runlock"
	"github.com/clusterctl/clusterctl/transport"
)

// noNetwork is set by tests that run arbitrary command lines (the fuzz test): a command that got past its
// validation stops where it would first reach a host or download anything.
var noNetwork bool

// errOffline ends such a command.
var errOffline = errors.New("offline: this process may not reach the network")

func offline() error {
	if noNetwork {
		return errOffline
	}
	return nil
}

// The drain every command does (remove-node, upgrade) waits as long by default.
const (
	defaultDrainTimeout = 5 * time.Minute
	drainTimeoutUsage   = "how long a node's drain may take (evictions a PodDisruptionBudget refuses are retried until then)"
)

// sshOptions are the flags of every command that connects to hosts.
type sshOptions struct {
	AcceptNew      bool
	SSHConfig      string
	ConnectTimeout time.Duration
	Persist        time.Duration
}

// persistEnv sets --ssh-persist's default.
const persistEnv = "CLUSTERCTL_SSH_PERSIST"

// defaultPersist is --ssh-persist's default: $CLUSTERCTL_SSH_PERSIST, else 60 s (Ansible's
// ControlPersist); a value that is no duration is refused when the command opens its connections.
func defaultPersist() time.Duration {
	if v, ok := os.LookupEnv(persistEnv); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		return -1
	}
	return time.Minute
}

func (o *sshOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.AcceptNew, "ssh-accept-new", false, "trust and record the host key of hosts never seen before, in the state directory's known_hosts (for throwaway machines; a changed key is still refused)")
	f.StringVar(&o.SSHConfig, "ssh-config", "", "OpenSSH client config to honour where the inventory is silent (default ~/.ssh/config; \"none\" to ignore it)")
	f.DurationVar(&o.ConnectTimeout, "connect-timeout", 10*time.Second, "time to connect and log in to one host (or bastion)")
	f.DurationVar(&o.Persist, "ssh-persist", defaultPersist(), "keep each host's SSH connection open this long after the command, for the next command to use instead of logging in again (a process of clusterctl's on this workstation; 0: close them at the end; default from $"+persistEnv+")")
	allowZero(cmd, "ssh-persist")
}

// openReading opens the session (the inventory, --limit, the state directory, the SSH dialer) for a
// command that writes nothing in the state directory (preflight, exec): one it had to make is removed
// when it is still empty at the end (done); host keys recorded by --ssh-accept-new keep it.
func openReading(g *globalOptions, s *sshOptions, sink transport.Sink) (env *playbooks.Env, done func(), err error) {
	env, created, err := openEnvNeeding(g, s, sink, stateCreate)
	if err != nil {
		return nil, nil, err
	}
	return env, func() {
		env.Close()
		if created {
			if os.Remove(env.StateDir) == nil && filepath.Base(filepath.Dir(env.StateDir)) == ".clusterctl" {
				_ = os.Remove(filepath.Dir(env.StateDir))
			}
		}
	}, nil
}

// openCluster opens the session for commands on a running cluster: a state directory that holds no
// cluster up built is refused (exit 2) and nothing is created.
func openCluster(g *globalOptions, s *sshOptions, sink transport.Sink) (*playbooks.Env, error) {
	env, _, err := openEnvNeeding(g, s, sink, stateCluster)
	return env, err
}

// openEnvNeeding loads the inventory, applies --limit, prepares the state directory (as need says) and the
// SSH dialer; created says whether it made the state directory (a run that then fails before changing
// anything removes it: dropNewState).
func openEnvNeeding(g *globalOptions, s *sshOptions, sink transport.Sink, need stateNeed) (env *playbooks.Env, created bool, err error) {
	inv, state, created, err := loadWithState(g, need)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if err != nil && created {
			dropNewState(state)
		}
	}()
	hosts, err := inv.Limit(g.Limit)
	if err != nil {
		return nil, false, usageError("%v", err)
	}
	if err := offline(); err != nil {
		return nil, false, err
	}
	if s.Persist < 0 {
		return nil, false, usageError("$%s=%q is not a duration (such as 60s, or 0 to close connections at the end)", persistEnv, os.Getenv(persistEnv))
	}
	d, err := transport.NewDialer(transport.Options{
		ClusterKnownHosts: filepath.Join(state, "known_hosts"),
		KnownHosts:        append(append([]string{}, inv.SSH.KnownHosts...), "~/.ssh/known_hosts"),
		AcceptNew:         s.AcceptNew,
		RecordTrusted:     need == stateEmpty, // state pull: the new directory verifies the hosts on its own
		Agent:             inv.SSH.Agent == nil || *inv.SSH.Agent,
		SSHConfig:         s.SSHConfig,
		ConnectTimeout:    s.ConnectTimeout,
		Passphrase:        secret(g, "CLUSTERCTL_SSH_PASSPHRASE", func(file string) string { return "Passphrase for " + file + ": " }),
		Password:          loginPassword(g),
		BecomePassword:    becomePassword(g),
		Log:               g.log,
		Keeper:            keeperFor(g, s, state),
	})
	if err != nil {
		return nil, false, &exitError{code: exitUsage, err: err}
	}
	if v, ok := sink.(*eventView); ok {
		v.inventoryOrder(inv)
	}
	return playbooks.NewEnv(playbooks.EnvConfig{Inv: inv, Hosts: hosts, Dialer: d, Forks: g.Forks, Sink: sink, Log: g.log, StateDir: state}), created, nil
}

// dropNewState removes a state directory this run made when the run stopped before it built anything:
// only host keys recorded by --ssh-accept-new can be in it, and they are recorded again on the next run.
// Anything else found there is left, and so is the directory.
func dropNewState(dir string) {
	for _, f := range []string{"known_hosts", "known_hosts.lock", runlock.FileName} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	_ = os.Remove(dir)
	if parent := filepath.Dir(dir); filepath.Base(parent) == ".clusterctl" {
		_ = os.Remove(parent) // the default's parent, when nothing else is in it
	}
}

// stateDir is --state-dir, else .clusterctl/<cluster name> beside the inventory.
func (g *globalOptions) stateDir(inv *inventory.Inventory) string {
	if g.StateDir != "" {
		return g.StateDir
	}
	return filepath.Join(filepath.Dir(g.Inventory), ".clusterctl", inv.Cluster.Name)
}

// secret reads a secret from an environment variable, else asks once on the terminal; nil when neither is
// possible (the dialer then says what is missing).
func secret(g *globalOptions, env string, prompt func(string) string) func(string) ([]byte, error) {
	if v, ok := os.LookupEnv(env); ok {
		return func(string) ([]byte, error) { return []byte(v), nil }
	}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return nil
	}
	return func(what string) ([]byte, error) {
		fmt.Fprint(g.stderr, prompt(what))
		b, err := term.ReadPassword(int(os.Stdin.Fd()))
		fmt.Fprintln(g.stderr)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", env, err)
		}
		return b, nil
	}
}

func loginPassword(g *globalOptions) func(user, host string) (string, error) {
	ask := secret(g, "CLUSTERCTL_SSH_PASSWORD", func(who string) string { return "SSH password for " + who + ": " })
	if ask == nil {
		return nil
	}
	return func(user, host string) (string, error) {
		b, err := ask(user + "@" + host)
		return string(b), err
	}
}

func becomePassword(g *globalOptions) func() (string, error) {
	ask := secret(g, "CLUSTERCTL_BECOME_PASSWORD", func(string) string { return "sudo password: " })
	if ask == nil {
		return nil
	}
	return func() (string, error) {
		b, err := ask("")
		return string(b), err
	}
}

// failedOnHosts turns an operation that failed on some host into exit code 1.
func failedOnHosts(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	return &exitError{code: exitFailed, err: err}
}

// progressView is where a command's events go: JSON lines on stdout with --output json, else the live or
// plain view on stderr.
func (g *globalOptions) progressView() *eventView {
	if g.Output == "json" {
		return newEventView(g.stdout, g.Output)
	}
	return newEventView(g.stderr, g.Output)
}

// confirm asks on the terminal before a destructive step; without a terminal the user must pass --yes.
// what says what would happen; accept says whether the answer typed confirms.
func confirm(g *globalOptions, what, question string, accept func(answer string) bool) error {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return usageError("%s; pass --yes to confirm when not on a terminal", what)
	}
	fmt.Fprint(g.stderr, question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if !accept(strings.TrimSpace(line)) {
		return usageError("not confirmed; nothing was changed")
	}
	return nil
}

// yes accepts y or yes.
func yes(answer string) bool {
	a := strings.ToLower(answer)
	return a == "y" || a == "yes"
}

// hostArgs checks that every NAME argument of a command is a host of the inventory.
func hostArgs(g *globalOptions, inv *inventory.Inventory, cmd string, names []string) error {
	var unknown []string
	for _, n := range names {
		if inv.Host(n) == nil {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return usageError("%s: %s is not a host of %s (hosts: %s)", cmd, strings.Join(unknown, ", "), g.Inventory, strings.Join(hostNames(inv), ", "))
	}
	return nil
}

func hostNames(inv *inventory.Inventory) []string {
	out := make([]string, 0, len(inv.Hosts))
	for _, h := range inv.Hosts {
		out = append(out, h.Name)
	}
	return out
}

func hostNamesOf(hosts []*inventory.Host) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}

// writeOut writes what a command made to stdout, or with --out to a new file of that mode: an existing one
// is refused (exit 2, with why), never written over. It reports whether it wrote the file.
func writeOut(g *globalOptions, out string, data []byte, mode fs.FileMode, why string) (bool, error) {
	if out == "" {
		_, err := g.stdout.Write(data)
		return false, err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return false, usageError("--out %s exists: %s", out, why)
	}
	if err != nil {
		return false, usageError("--out: %v", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
