package apply

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// markHost is a host whose only file is its membership mark (nil: none).
type markHost struct {
	Host
	mark []byte
}

func (h markHost) Name() string { return "w1" }

func (h markHost) Get(_ context.Context, p string) ([]byte, error) {
	if p != kubeadm.MemberPath || h.mark == nil {
		return nil, fs.ErrNotExist
	}
	return h.mark, nil
}

func TestCheckMember(t *testing.T) {
	ctx := context.Background()
	ours := []string{"cluster=lab ca=sha256:aa"}
	for _, tc := range []struct {
		mark  string
		force bool
		want  error
	}{
		{"cluster=lab ca=sha256:aa\n", false, nil},
		{"", false, transport.ErrSkipped},
		{"", true, nil},
		{"cluster=other ca=sha256:bb\n", false, ErrNotMember},
		{"cluster=other ca=sha256:bb\n", true, nil},
	} {
		h := markHost{}
		if tc.mark != "" {
			h.mark = []byte(tc.mark)
		}
		err := CheckMember(ctx, h, ours, tc.force)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("mark %q force %v: %v, want %v", tc.mark, tc.force, err, tc.want)
		}
		if errors.Is(err, ErrNotMember) && (!strings.Contains(err.Error(), "cluster=other") || !strings.Contains(err.Error(), "--force")) {
			t.Errorf("the refusal does not say why: %v", err)
		}
	}
}
