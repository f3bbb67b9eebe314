package transport

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// keepalive sends keepalive@openssh.com requests; two unanswered in a row close the connection, so that
// commands waiting on a dead peer fail instead of hanging.
func (c *Conn) keepalive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		switch err := c.ping(interval); {
		case err == nil:
			missed = 0
		case errors.Is(err, errNoAnswer):
			if missed++; missed >= 2 {
				c.log.Warn("no answer to keepalives; closing the connection")
				c.markLost(fmt.Errorf("no answer to keepalives for %s", 2*interval))
				c.Close()
				return
			}
		case errors.Is(err, net.ErrClosed):
			return
		default:
			c.log.Warn("connection lost", "err", err)
			c.markLost(err)
			c.Close()
			return
		}
	}
}

// errNoAnswer is a keepalive not answered in time.
var errNoAnswer = errors.New("no answer")

// ping sends one keepalive@openssh.com request and waits for its answer at most timeout: errNoAnswer when
// none came, net.ErrClosed when the connection was closed or ended meanwhile, else the request's error.
func (c *Conn) ping(timeout time.Duration) error {
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		return err
	case <-time.After(timeout):
		return errNoAnswer
	case <-c.closed:
		return net.ErrClosed
	case <-c.dead:
		return net.ErrClosed
	}
}
