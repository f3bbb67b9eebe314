package main

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/transport"
)

// keeperFor is the connection keeper of the state directory (transport/keeper.go) for this command; nil
// with --ssh-persist 0, or when there is no directory of this user's alone for its socket (then each
// command logs in to each host itself, as with 0).
func keeperFor(g *globalOptions, s *sshOptions, state string) *transport.KeeperClient {
	if s.Persist <= 0 {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if state, err = filepath.Abs(state); err != nil {
		return nil
	}
	sock, err := transport.KeeperSocket(state, exe)
	if err != nil {
		g.log.Warn("SSH connections are not kept between commands", "err", err)
		return nil
	}
	return &transport.KeeperClient{Socket: sock, Persist: s.Persist, Log: g.log, Start: func() error {
		return startKeeper(exe, sock, state, s.Persist)
	}}
}

// startKeeper starts the keeper, a session of its own that outlives this command; what it logs goes to
// SOCKET's .log beside it.
var startKeeper = func(exe, sock, state string, idle time.Duration) error {
	logf, err := os.OpenFile(transport.KeeperLog(sock), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(exe, "ssh-keeper", "--socket", sock, "--idle", idle.String(), "--watch", state)
	cmd.Stderr = logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reaped if this command outlives it; how it ended is in its log
	return nil
}

// newKeeperCmd is the keeper itself, started by the commands that reach hosts (hidden: not for users).
func newKeeperCmd() *cobra.Command {
	var o transport.KeeperOptions
	cmd := &cobra.Command{
		Use:    "ssh-keeper",
		Short:  "Keep the SSH connections of one state directory open between commands (started by them)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Socket == "" {
				return usageError("--socket is required")
			}
			o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			return transport.ServeKeeper(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Socket, "socket", "", "the Unix socket to listen on")
	f.DurationVar(&o.Idle, "idle", time.Minute, "exit after this long without a command")
	f.StringVar(&o.Watch, "watch", "", "exit when this path (the state directory) is gone")
	return cmd
}
