package netpol

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/clusterctl/clusterctl/tasks/bridge"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/flannel"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/preflight"
)

func TestCheck(t *testing.T) {
	node := func(known bool, mods ...string) network.Node {
		f := &facts.Facts{KernelModulesKnown: known, KernelModules: map[string]bool{}}
		for _, m := range mods {
			f.KernelModules[m] = true
		}
		return network.Node{Host: "w1", Facts: f}
	}
	for _, tc := range []struct {
		node network.Node
		sev  preflight.Severity // "": no finding
		want string
	}{
		{node(true, "nfnetlink_queue", "nft_queue", "nft_compat", "xt_NFQUEUE"), "", ""},
		{node(true, "nfnetlink_queue", "nft_compat", "xt_NFQUEUE"), preflight.SevWarning, "no nft_queue"},
		{node(true, "nfnetlink_queue"), preflight.SevError, "no nft_queue"},
		{node(true, "nft_queue"), preflight.SevError, "no nfnetlink_queue"},
		{node(false), preflight.SevWarning, "cannot tell"},
		{network.Node{Host: "w2"}, "", ""}, // not in the run: no facts
	} {
		f := Check([]network.Node{tc.node})
		switch {
		case tc.sev == "" && len(f) != 0:
			t.Errorf("%v: %+v, want none", tc.node.Facts, f)
		case tc.sev != "" && (len(f) != 1 || f[0].Severity != tc.sev || f[0].Check != CheckName || !strings.Contains(f[0].Message, tc.want)):
			t.Errorf("%v: %+v, want a %s saying %q", tc.node.Facts, f, tc.sev, tc.want)
		}
	}
}

func TestWith(t *testing.T) {
	p := With(bridge.New(0, false))
	if _, ok := p.(network.Early); !ok {
		t.Error("the bridge's early network is lost with the policy controller")
	}
	if _, ok := With(flannel.New(0, false)).(network.Staged); !ok {
		t.Error("flannel's staged network is lost with the policy controller")
	}
	if !slices.Contains(p.Images(), images.Image{Name: ImageName, Ref: Image}) {
		t.Errorf("images %v lack the controller's", p.Images())
	}
	if l := p.Leftovers(); !slices.Contains(l.Graceful, Name) || !slices.Contains(l.Links, bridge.Bridge) {
		t.Errorf("leftovers %+v", l)
	}
	objs, err := Objects("registry.example:5000/kube-network-policies:v0.8.0", "https://10.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	ds := objs[len(objs)-1].(*appsv1.DaemonSet)
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Name != Name || c.Command[0] != "/bin/netpol" || !slices.Contains(c.Args, "--nfqueue-id=100") || !ds.Spec.Template.Spec.HostNetwork {
		t.Errorf("container %+v", c)
	}
	if _, err := Objects("x", "10.0.0.1"); err == nil {
		t.Error("an endpoint that is no URL was taken")
	}
}
