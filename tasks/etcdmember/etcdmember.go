// Package etcdmember manages the stacked etcd cluster's membership through the etcd API, dialled through any
// function (a control-plane host's SSH connection): a joining member is added as a learner before it starts,
// promoted once it has caught up, and removed only when the cluster keeps quorum without it.
package etcdmember

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Client is an etcd client on one endpoint.
type Client struct {
	c *clientv3.Client
}

// New connects to endpoint (https://IP:2379) with a client certificate signed by the etcd CA (the API
// server's apiserver-etcd-client), every connection made by dial.
func New(endpoint string, caPEM, certPEM, keyPEM []byte, dial func(ctx context.Context, addr string) (net.Conn, error)) (*Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("etcd CA: no certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Close closes the client.
func (c *Client) Close() error { return c.c.Close() }

// Member is one etcd member.
type Member struct {
	ID       uint64
	Name     string
	PeerURL  string
	Learner  bool
	Started  bool // it has a name: it has started and joined
	ClientOK bool
}

// List returns the members.
func (c *Client) List(ctx context.Context) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.c.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, member(m))
	}
	return out, nil
}

func member(m *etcdserverpb.Member) Member {
	peer := ""
	if len(m.PeerURLs) > 0 {
		peer = m.PeerURLs[0]
	}
	return Member{ID: m.ID, Name: m.Name, PeerURL: peer, Learner: m.IsLearner, Started: m.Name != ""}
}

// Find returns the member with peerURL, or nil.
func Find(members []Member, peerURL string) *Member {
	for i := range members {
		if members[i].PeerURL == peerURL {
			return &members[i]
		}
	}
	return nil
}

// Quorum reports whether every voting member has started (a learner does not vote); a cluster whose members
// have not all started must not be changed further.
func Quorum(members []Member) error {
	var missing []string
	for _, m := range members {
		if !m.Learner && !m.Started {
			missing = append(missing, m.PeerURL)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("etcd members not started: %s", strings.Join(missing, ", "))
	}
	return nil
}

// AddLearner adds peerURL as a learner unless a member has it already; it returns the member.
func (c *Client) AddLearner(ctx context.Context, peerURL string) (*Member, bool, error) {
	members, err := c.List(ctx)
	if err != nil {
		return nil, false, err
	}
	if m := Find(members, peerURL); m != nil {
		return m, false, nil
	}
	if err := Quorum(members); err != nil {
		return nil, false, fmt.Errorf("not adding %s: %w", peerURL, err)
	}
	var m Member
	err = whileUnhealthy(ctx, func(ctx context.Context) error {
		resp, err := c.c.MemberAddAsLearner(ctx, []string{peerURL})
		if err == nil {
			m = member(resp.Member)
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return &m, true, nil
}

// whileUnhealthy runs a membership change (each try bounded to 15 s), retrying for up to a minute while
// etcd refuses it as "unhealthy cluster": etcd changes membership only when every member has been
// connected to the leader for a while, which is not so right after one joined or restarted.
func whileUnhealthy(ctx context.Context, change func(context.Context) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := change(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) && !strings.Contains(err.Error(), "unhealthy cluster") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// Promote makes a learner a voting member once it has caught up with the leader, retrying until timeout.
func (c *Client) Promote(ctx context.Context, id uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		members, err := c.List(ctx)
		if err == nil {
			for _, m := range members {
				if m.ID == id && !m.Learner {
					return nil
				}
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = c.c.MemberPromote(pctx, id)
			cancel()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd member %x not promoted after %s: %w", id, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Remove removes the member with peerURL, refusing when the remaining voting members could not keep quorum
// (more than half of them started).
func (c *Client) Remove(ctx context.Context, peerURL string) (bool, error) {
	m, err := c.CanRemove(ctx, peerURL)
	if m == nil || err != nil {
		return false, err
	}
	if err := whileUnhealthy(ctx, func(ctx context.Context) error { _, err := c.c.MemberRemove(ctx, m.ID); return err }); err != nil {
		return false, err
	}
	return true, nil
}

// CanRemove finds the member with peerURL (nil when there is none) and says, as an error, why removing it
// would cost quorum.
func (c *Client) CanRemove(ctx context.Context, peerURL string) (*Member, error) {
	members, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	m := Find(members, peerURL)
	if m == nil {
		return nil, nil
	}
	voters, started := 0, 0
	for _, o := range members {
		if o.ID == m.ID || o.Learner {
			continue
		}
		voters++
		if o.Started {
			started++
		}
	}
	if !m.Learner && (voters == 0 || started <= voters/2) {
		return m, fmt.Errorf("removing %s would leave %d started of %d voting members: etcd would lose quorum", peerURL, started, voters)
	}
	return m, nil
}
