package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/transport"
)

type renderOptions struct {
	out string
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
The images (etcd and pause paired with the Kubernetes version as kubeadm pairs them) and the kubelet's
path are the ones up uses. Hosts without internalAddress in the inventory need it for this command (up
learns it from the host). So do two things of security.profile cis: the etcd user's IDs and whether a
host's hostname is its node name come from the hosts, so here etcd runs as root and every kubelet is
given its node name (--hostname-override).`,
		Example: `  clusterctl render -i hosts.yaml --out rendered/
  find rendered/cp1 -type f | sort
  openssl x509 -noout -text -in rendered/cp1/etc/kubernetes/pki/apiserver.crt`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(g, o)
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "directory to write into (required; created 0700; files already there are replaced)")
	return cmd
}

func runRender(g *globalOptions, o *renderOptions) error {
	if o.out == "" {
		return usageError("render needs --out DIR: the directory to write each host's files into")
	}
	// --out is checked before anything is written: a bad one changes nothing (exit 2 says so)
	if err := outDir(o.out); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := writable(o.out); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--out %s: %w", o.out, err)}
	}
	inv, state, _, err := loadWithState(g, stateCreate)
	if err != nil {
		return err
	}
	set := images.For(inv.Cluster.ImageRepository, inv.Cluster.KubernetesVersion).With(playbooks.NetworkImages(inv)...)
	res, err := render.Render(render.Options{Inv: inv, StateDir: state, Images: set, KubeletPath: kubeadm.Binary("kubelet"),
		InstallRuntime: inv.Cluster.InstallsRuntime()})
	if err != nil {
		return failedOnHosts(err)
	}
	written := 0
	write := func(dir string, files []transport.File) error {
		for _, f := range files {
			rel := filepath.Join(dir, filepath.FromSlash(f.Path))
			if err := noLinks(o.out, rel); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := statedir.WriteFile(filepath.Join(o.out, rel), f.Data, f.Mode); err != nil {
				return err
			}
			written++
		}
		return nil
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
	if g.Output == "json" {
		return writeReport(g.stdout, "render_result", "ok", map[string]any{"files": written, "hosts": len(res.Hosts), "dir": o.out,
			"endpoint": res.Endpoint, "pki": filepath.Join(state, "pki")})
	}
	fmt.Fprintf(g.stdout, "rendered %d files for %d hosts into %s (API endpoint %s; PKI in %s)\n", written, len(res.Hosts), o.out, res.Endpoint, filepath.Join(state, "pki"))
	return nil
}

// stateNeed says what a command needs of the state directory.
type stateNeed int

const (
	// stateCreate: made when missing (up, render, preflight, exec, reset).
	stateCreate stateNeed = iota
	// stateCluster: must hold a cluster this workstation built (admin.conf); nothing is created.
	stateCluster
	// stateExisting: must exist (a command that reads what render or up left); nothing is created.
	stateExisting
	// stateEmpty: made when missing, else must be empty (state pull fills it).
	stateEmpty
)

// loadWithState loads a valid inventory and prepares its state directory; created says whether this call
// made it.
func loadWithState(g *globalOptions, need stateNeed) (inv *inventory.Inventory, state string, created bool, err error) {
	inv, diags, err := g.loadInventory()
	if err != nil {
		return nil, "", false, err
	}
	printNotices(g.stderr, diags)
	if err := diags.Err(); err != nil {
		return nil, "", false, &exitError{code: exitUsage, err: err}
	}
	state = g.stateDir(inv)
	_, statErr := os.Stat(state)
	if need == stateExisting && statErr != nil {
		return nil, "", false, usageError("no state directory for cluster %q at %s: clusterctl render or up makes it (--state-dir names another)", inv.Cluster.Name, state)
	}
	if need == stateEmpty && statErr == nil {
		if entries, err := os.ReadDir(state); err != nil || len(entries) > 0 {
			return nil, "", false, usageError("the state directory %s is not empty: state pull fills an empty one (--state-dir names another)", state)
		}
	}
	if need == stateCluster {
		built, err := statedir.IsBuilt(state, csr.LearnedFile)
		if err != nil {
			return nil, "", false, &exitError{code: exitUsage, err: err}
		}
		if !built {
			return nil, "", false, usageError("no cluster %q has been built from this workstation: %s holds none (clusterctl up -i %s builds it; --state-dir names another state directory)",
				inv.Cluster.Name, state, g.Inventory)
		}
	}
	if err := playbooks.EnsureStateDir(state); err != nil {
		return nil, "", false, &exitError{code: exitUsage, err: err}
	}
	return inv, state, errors.Is(statErr, fs.ErrNotExist), nil
}

// outDir makes the directory render writes keys into (0700), or accepts an existing one only when it is a
// real directory of this user that no one else can write to: nobody else may plant a link in it.
func outDir(dir string) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	switch sys, _ := st.Sys().(*syscall.Stat_t); {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("--out %s is a symbolic link: give the directory itself", dir)
	case !st.IsDir():
		return fmt.Errorf("--out %s is not a directory", dir)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("--out %s has mode %04o: others can write into it, and render writes private keys (use a new directory, or chmod go-w %s)", dir, st.Mode().Perm(), dir)
	case sys != nil && int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("--out %s belongs to uid %d, not to you", dir, sys.Uid)
	}
	return nil
}

// noLinks refuses a file under root whose path passes through a symbolic link (a file of an earlier render
// replaced by a link would otherwise send a key elsewhere).
func noLinks(root, rel string) error {
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: render does not write through links", p)
		}
	}
	return nil
}

// writable checks that files can be made in dir (a file made and removed).
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".clusterctl-probe-")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
