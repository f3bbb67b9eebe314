package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// bulkMin is the size of a transfer from which a Conn made through the keeper sends it over a direct
// connection of its own (dialled on first use) rather than the kept one: relaying costs the workstation
// about a CPU-second per GB, a login costs the host 0.15-0.3 CPU-s (sshd, PAM, root's user manager). A
// routes file, a certificate, a kubeconfig goes over the kept connection; a binary or an image archive
// over the direct one. A variable for the tests.
var bulkMin int64 = 16 << 20

// sftpServerPacket is the most data an SFTP read or write request carries to the sftp-server clusterctl
// starts itself (OpenSSH's, whose messages may be 256 KiB, reads at most 255 KiB), and sftpServerRequests
// how many of a file's requests are in flight at once: the 2 MiB of sshd's channel window, as pkg/sftp's
// defaults (32 KiB, 64) have it. A 220 MB push costs the host's sshd and sftp-server about 12 % less CPU,
// the workstation's kernel a quarter less (docs/benchmarks.md, add-node). The server's sftp subsystem,
// whatever it is, gets pkg/sftp's defaults.
const (
	sftpServerPacket   = 255 << 10
	sftpServerRequests = 8
)

// sftpServers are where Linux distributions put OpenSSH's sftp-server.
var sftpServers = []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server", "/usr/libexec/sftp-server"}

// sftpServerScript finds sftp-server and runs it with umask 077 (-u), so that what it creates is private
// until its final mode is set; 127 when there is none.
var sftpServerScript = func() string {
	var b strings.Builder
	b.WriteString("for p in")
	for _, p := range sftpServers {
		b.WriteString(" " + ShellQuote(p))
	}
	b.WriteString(`; do [ -x "$p" ] && exec "$p" -u 077; done; exit 127`)
	return b.String()
}()

// SFTP returns the connection's SFTP client, opening it on first use: sftp-server run with a strict umask,
// through sudo when the connection becomes root, so that files are written as root either way. A root login
// on a host whose sftp-server is not where distributions put it gets the server's sftp subsystem instead.
// It runs on the Conn's own connection, the kept one when that goes through the keeper: transfers of
// bulkMin bytes or more take bulkSFTP's.
func (c *Conn) SFTP(ctx context.Context) (_ *sftp.Client, err error) {
	defer func() { err = c.connErr(ctx, err) }()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sftp != nil {
		return c.sftp, nil
	}
	var client *sftp.Client
	if c.bulkDial == nil {
		client, err = c.openSFTP(ctx, c.client)
	} else {
		client, err = c.openKeptSFTP(ctx)
	}
	if err != nil {
		return nil, err
	}
	c.sftp = client
	return client, nil
}

// sftpFor is the SFTP client for a transfer of size bytes: SFTP's, or for bulkMin bytes or more on a Conn
// made through the keeper, one on the direct connection made for files on first use (sftpClient).
func (c *Conn) sftpFor(ctx context.Context, size int64) (*sftp.Client, error) {
	if c.bulkDial == nil || size < bulkMin {
		return c.SFTP(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bulkSFTP != nil {
		return c.bulkSFTP, nil
	}
	host, err := c.sftpClient(ctx)
	if err != nil {
		return nil, err
	}
	client, err := c.openSFTP(ctx, host)
	if err != nil {
		return nil, err
	}
	c.bulkSFTP = client
	return client, nil
}

// openKeptSFTP opens the SFTP session on the kept connection, and asks the host meanwhile whether it still
// answers (a keepalive, relayed to it): a host whose link was cut after the command reached it, which
// would leave the session's opening without an answer, is lost (unreachable) within the connect timeout,
// as it is when the direct connection for files cannot be made (dialBulk).
func (c *Conn) openKeptSFTP(ctx context.Context) (*sftp.Client, error) {
	type opened struct {
		client *sftp.Client
		err    error
	}
	done := make(chan opened, 1)
	go func() {
		client, err := c.openSFTP(ctx, c.client)
		done <- opened{client, err}
	}()
	pingc := make(chan error, 1)
	go func() { pingc <- c.ping(c.keptTimeout) }()
	select {
	case r := <-done:
		return r.client, r.err
	case perr := <-pingc:
		if perr == nil {
			r := <-done
			return r.client, r.err
		}
		err := c.lose(perr, c.keptTimeout, errors.New("opening an SFTP session: no answer"))
		if r := <-done; r.client != nil {
			r.client.Close()
		}
		return nil, err
	}
}

// openSFTP starts sftp-server on the connection client (the Conn's, or its direct one for files), or the
// server's sftp subsystem where none of sftpServers is found. Its session ends with the client's Close or
// the connection's.
func (c *Conn) openSFTP(ctx context.Context, client *ssh.Client) (*sftp.Client, error) {
	sc, err := c.startSFTP(ctx, client, false)
	if err != nil && !c.become {
		sc, err = c.startSFTP(ctx, client, true)
	}
	return sc, err
}

func (c *Conn) startSFTP(ctx context.Context, client *ssh.Client, subsystem bool) (*sftp.Client, error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, &DialError{Host: c.target.Name, Address: c.target.addr(), Err: fmt.Errorf("opening an SFTP session: %w", err)}
	}
	w, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	r, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	// Locked: on failure it is read while the session may still be copying into it.
	var stderr lockedBuffer
	switch {
	case subsystem:
		err = sess.RequestSubsystem("sftp")
	case !c.become:
		sess.Stderr = &stderr
		err = sess.Start(sftpServerScript)
	case c.becomePassword == "":
		sess.Stderr = &stderr
		err = sess.Start("sudo -n -- sh -c " + ShellQuote(sftpServerScript))
	default:
		g := newSudoGate(c.becomePassword)
		g.in, g.out = w, &stderr
		sess.Stderr = g
		if err = sess.Start(g.wrap(sftpServerScript)); err == nil {
			// The SFTP protocol starts only once sftp-server runs, so sudo never reads it as a password.
			select {
			case <-g.readyCh:
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(30 * time.Second):
				err = errors.New("sudo did not start sftp-server")
			}
		}
	}
	if err == nil {
		var sc *sftp.Client
		opts := []sftp.ClientOption{sftp.UseConcurrentWrites(true)}
		if !subsystem {
			opts = append(opts, sftp.MaxPacketUnchecked(sftpServerPacket), sftp.MaxConcurrentRequestsPerFile(sftpServerRequests))
		}
		if sc, err = sftp.NewClientPipe(r, w, opts...); err == nil {
			return sc, nil
		}
	}
	sess.Close()
	if msg := strings.TrimSpace(stderr.String()); msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	if !subsystem && !c.become {
		return nil, err
	}
	return nil, fmt.Errorf("%s: starting SFTP (sftp-server in %s): %w", c.target.Name, strings.Join(sftpServers, ", "), err)
}
