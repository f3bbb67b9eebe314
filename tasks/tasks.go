// Package tasks holds the units of work clusterctl does on hosts, each idempotent and usable alone, one
// subpackage each (facts, preflight, pki, kubeconfig, manifests, join, ...). This package is only their
// contract with a host: a Runner.
package tasks

import (
	"context"

	"github.com/clusterctl/clusterctl/transport"
)

// Runner is what a task needs from a host: run a command (as root) and say which host it is.
// *transport.Conn implements it.
type Runner interface {
	Name() string
	Run(ctx context.Context, command string, stdin []byte) (transport.Result, error)
}

var _ Runner = (*transport.Conn)(nil)
