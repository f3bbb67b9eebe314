package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"strconv"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/templates"
)

// LocalProxyPort is the node-local API proxy's loopback port: with several control-plane nodes and no
// controlPlaneEndpoint, every node runs haproxy as a static Pod (image from the artifacts) on this port,
// forwarding to every API server that is ready.
const LocalProxyPort = 7443

// LocalProxy reports whether the inventory's nodes reach the API servers through a node-local proxy.
func LocalProxy(inv *inventory.Inventory) bool { return LocalProxyOf(inv, nil) }

// LocalProxyOf is LocalProxy for a cluster of the named control-plane hosts (see Options.ControlPlanes).
func LocalProxyOf(inv *inventory.Inventory, controlPlanes []string) bool {
	return len(ControlPlanes(inv, controlPlanes)) > 1 && inv.Cluster.ControlPlaneEndpoint == ""
}

// proxyFiles are the node-local API proxy's configuration (every control-plane node a backend) and unit.
func proxyFiles(o Options, nodeName string, add func(string, []byte, fs.FileMode)) error {
	type backend struct{ Name, Address string }
	var backends []backend
	for _, cp := range ControlPlanes(o.Inv, o.ControlPlanes) {
		ip := inventory.AddrText(cp.NodeIP(o.NodeIPs[cp.Name]))
		if ip == "" {
			return fmt.Errorf("control-plane host %s: its node address is not known: set internalAddress in the inventory", cp.Name)
		}
		backends = append(backends, backend{cp.NodeName, net.JoinHostPort(ip, strconv.Itoa(o.Inv.Cluster.APIServer.BindPort))})
	}
	cfg, err := templates.Render("apiserver-proxy.cfg", map[string]any{"Port": LocalProxyPort, "Backends": backends})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(cfg)
	pod, err := manifests.Marshal(manifests.APIServerProxy(o.Images.Ref(images.APIServerProxy), kubeadm.APIServerProxyConfig, hex.EncodeToString(sum[:]), LocalProxyPort), nodeName)
	if err != nil {
		return err
	}
	add(kubeadm.APIServerProxyConfig, cfg, modePublic)
	add(kubeadm.Manifest(kubeadm.APIServerProxy), pod, modePublic)
	return nil
}
