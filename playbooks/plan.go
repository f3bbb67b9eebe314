package playbooks

import (
	"maps"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/render"
)

// plan is what a run works from, made before the run changes anything on a host and read-only after: a
// new deployment's plan has the run's hosts; preflight's has their facts and each node's address too;
// render's has everything: the cluster's control-plane hosts, the artifacts and images, etcd's membership,
// every host's files, the membership mark, which hosts join with a token. Each is a new plan (with), so
// that no step changes what another read; a run that needs other files (a CA rotation's next stage)
// renders a new one. The runner hands each step the plan as its parameter (Step.Run, Step.Plan): the
// deployment holds none, so what a step reads of the run comes in through it; the steps that read each
// part are listed in testdata/steps.golden.
type plan struct {
	// hosts are the hosts acted on, the first control-plane host (cp1) among them.
	hosts []*inventory.Host
	cp1   *inventory.Host
	// net is the pod network (cni.plugin), chosen once.
	net network.Plugin

	facts   map[string]*facts.Facts
	nodeIPs map[string]inventory.NodeAddrs // each host's addresses in the cluster, resolved once (Host.NodeIPs)

	cps []string // the cluster's control-plane hosts (nil: the inventory's)
	artifactSet
	// external etcd: the run's etcd hosts that join the running etcd cluster (the members they join), and
	// the hosts whose member is in it already
	etcdJoin    map[string][]manifests.EtcdMember
	etcdMembers []string
	rendered    *render.Result
	member      string          // the membership mark of the cluster's hosts
	joining     map[string]bool // hosts whose kubelet has no credentials yet: they join with their token
}

// artifactSet is where the hosts' binaries and images come from: an artifacts directory (dir) and its
// manifest, and the images the cluster runs.
type artifactSet struct {
	manifest    *artifacts.Manifest
	artDir      string
	images      images.Set
	kubeletPath string
	// addonImages are the images the add-ons run (reference → add-ons), imported on every node.
	addonImages map[string][]string
}

// with is a copy of the plan with the changes of set: the plan itself is left as it is.
func (p *plan) with(set func(*plan)) *plan {
	c := *p
	c.facts, c.nodeIPs, c.joining = maps.Clone(p.facts), maps.Clone(p.nodeIPs), maps.Clone(p.joining)
	set(&c)
	return &c
}

// caOf is the cluster CA certificate a render gives the hosts.
func caOf(res *render.Result) []byte {
	for _, hf := range res.Hosts {
		for _, f := range hf.Files {
			if f.Path == kubeadm.CACert {
				return f.Data
			}
		}
	}
	return nil
}
