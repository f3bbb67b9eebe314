package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/transport"
)

type renderOptions struct {
	out          string
	etcdVersion  string
	pauseVersion string
	kubeletPath  string
}

func newRenderCmd(g *globalOptions) *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Write every file each host would receive, without touching any host",
		Long: `Generate (or load, from the state directory) the cluster's PKI, kubeconfigs, static Pod manifests,
kubelet configuration and units, containerd configuration and kernel settings, and write exactly what
each host would receive as DIR/<host>/<absolute path>, with the modes the files will have, plus
DIR/_workstation/admin.conf. Workers get the CA certificate and no key, and no control-plane material.

Keys and certificates are kept in the state directory: rendering twice gives the same bytes, and a
certificate that no longer matches the inventory (a new SAN, a new control-plane host) is reissued and
reported. A bootstrap token and its kubeconfig are made only when a node joins, so they are not here.
Hosts without internalAddress in the inventory need it for this command (up learns it from the host).`,
		Example: `  clusterctl render -i hosts.yaml --out rendered/
  find rendered/cp1 -type f | sort
  openssl x509 -noout -text -in rendered/cp1/etc/kubernetes/pki/apiserver.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(g, o)
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "directory to write into (created; files already there are replaced)")
	cmd.Flags().StringVar(&o.etcdVersion, "etcd-version", "", "etcd image version (default: the one kubeadm pairs with the Kubernetes version)")
	cmd.Flags().StringVar(&o.pauseVersion, "pause-version", "", "pause image version (default: the one kubeadm pairs with the Kubernetes version)")
	cmd.Flags().StringVar(&o.kubeletPath, "kubelet-path", "/usr/bin/kubelet", "where the kubelet binary is on the hosts")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func runRender(g *globalOptions, o *renderOptions) error {
	inv, state, err := loadWithState(g)
	if err != nil {
		return err
	}
	etcd, pause := render.Versions(inv.Cluster.KubernetesVersion)
	if o.etcdVersion != "" {
		etcd = o.etcdVersion
	}
	if o.pauseVersion != "" {
		pause = o.pauseVersion
	}
	res, err := render.Render(render.Options{Inv: inv, StateDir: state, EtcdVersion: etcd, PauseVersion: pause, KubeletPath: o.kubeletPath})
	if err != nil {
		return failedOnHosts(err)
	}
	written := 0
	write := func(dir string, files []transport.File) error {
		for _, f := range files {
			p := filepath.Join(o.out, dir, filepath.FromSlash(f.Path))
			if err := pki.WriteFile(p, f.Data, f.Mode); err != nil {
				return err
			}
			written++
		}
		return nil
	}
	if err := os.MkdirAll(o.out, 0o700); err != nil {
		return err
	}
	for _, h := range res.Hosts {
		if err := write(h.Host, h.Files); err != nil {
			return err
		}
	}
	if err := write("_workstation", res.Workstation); err != nil {
		return err
	}
	for _, c := range res.Changes {
		line := fmt.Sprintf("%s %s", c.Action, c.What)
		if c.Reason != "" {
			line += ": " + c.Reason
		}
		fmt.Fprintln(g.stderr, line)
	}
	fmt.Fprintf(g.stdout, "rendered %d files for %d hosts into %s (API endpoint %s; PKI in %s)\n", written, len(res.Hosts), o.out, res.Endpoint, filepath.Join(state, "pki"))
	return nil
}

// loadWithState loads a valid inventory and prepares its state directory.
func loadWithState(g *globalOptions) (*inventory.Inventory, string, error) {
	inv, diags, err := g.loadInventory()
	if err != nil {
		return nil, "", err
	}
	printNotices(g.stderr, diags)
	if err := diags.Err(); err != nil {
		return nil, "", &exitError{code: exitUsage, err: err}
	}
	state := g.stateDir(inv)
	if err := playbooks.EnsureStateDir(state); err != nil {
		return nil, "", &exitError{code: exitUsage, err: err}
	}
	return inv, state, nil
}
