package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// ErrNotMember is the error of a host that carries another cluster's mark.
var ErrNotMember = errors.New("not a host of this cluster")

// CheckMember reads a host's membership mark (kubeadm.MemberPath) and says whether clusterctl may undo
// what it made there: nil for a host marked with one of marks (this cluster's); transport.ErrSkipped for a
// host with no mark (clusterctl made nothing there); ErrNotMember for another cluster's. force allows
// both.
func CheckMember(ctx context.Context, h Host, marks []string, force bool) error {
	data, err := h.Get(ctx, kubeadm.MemberPath)
	mark := strings.TrimSpace(string(data))
	switch {
	case errors.Is(err, fs.ErrNotExist) && !force:
		return transport.ErrSkipped
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err == nil && !slices.Contains(marks, mark) && !force:
		return fmt.Errorf("%s: %w: its mark %s says %q, and this cluster's is %s; reset only touches hosts this cluster's up marked (--force resets it anyway)",
			h.Name(), ErrNotMember, kubeadm.MemberPath, mark, strings.Join(quoteAll(marks), " or "))
	}
	return nil
}

func quoteAll(ss []string) []string {
	if len(ss) == 0 {
		return []string{"unknown (no CA in the state directory)"}
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
