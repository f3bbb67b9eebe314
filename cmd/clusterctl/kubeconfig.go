package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeconfig"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

func newKubeconfigCmd(g *globalOptions) *cobra.Command {
	var merge bool
	var into string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the cluster's admin kubeconfig, or merge it into ~/.kube/config under a context named for the cluster",
		Long: `Print the admin kubeconfig of the cluster (admin.conf in the state directory: a client certificate of
the kubeadm:cluster-admins group, bound to cluster-admin), or with --merge write it into your kubeconfig
(--kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config) as cluster, user and context
named after the cluster, replacing entries of those names, and make it the current context. The file is
written 0600, atomically; everything else in it is kept.

kubeconfig user issues a kubeconfig for someone else, with a certificate of its own.`,
		Example: `  clusterctl kubeconfig -i hosts.yaml > admin.conf
  clusterctl kubeconfig -i hosts.yaml --merge && kubectl get nodes
  clusterctl kubeconfig user alice --group developers --ttl 8h -i hosts.yaml --out alice.conf`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			inv, state, _, err := loadWithState(g, stateCluster)
			if err != nil {
				return err
			}
			data, err := pki.ReadSecret(filepath.Join(state, "admin.conf"))
			if err != nil {
				return err
			}
			if !merge {
				if into != "" {
					return usageError("--kubeconfig is where --merge writes: give --merge too")
				}
				_, err := g.stdout.Write(data)
				return err
			}
			return mergeKubeconfig(g, inv.Cluster.Name, data, into)
		},
	}
	cmd.Flags().BoolVar(&merge, "merge", false, "merge into your kubeconfig instead of printing, and switch to the cluster's context")
	cmd.Flags().StringVar(&into, "kubeconfig", "", "the kubeconfig --merge writes (default: the first file of $KUBECONFIG, else ~/.kube/config)")
	cmd.AddCommand(newKubeconfigUserCmd(g))
	return cmd
}

// mergeKubeconfig puts the admin kubeconfig's cluster, user and context into the user's file, named after
// the cluster (the user: CLUSTER-admin), and makes the context current.
func mergeKubeconfig(g *globalOptions, cluster string, admin []byte, into string) error {
	if into == "" {
		if env := filepath.SplitList(os.Getenv("KUBECONFIG")); len(env) > 0 && env[0] != "" {
			into = env[0]
		} else {
			home, err := os.UserHomeDir()
			if err != nil {
				return usageError("no home directory to find ~/.kube/config in: give --kubeconfig FILE")
			}
			into = filepath.Join(home, ".kube", "config")
		}
	}
	src, err := clientcmd.Load(admin)
	if err != nil {
		return fmt.Errorf("admin.conf: %w", err)
	}
	ctx := src.Contexts[src.CurrentContext]
	if ctx == nil || src.Clusters[ctx.Cluster] == nil || src.AuthInfos[ctx.AuthInfo] == nil {
		return errors.New("admin.conf has no usable current context")
	}
	dst := clientcmdapi.NewConfig()
	if data, err := os.ReadFile(into); err == nil {
		if dst, err = clientcmd.Load(data); err != nil {
			return usageError("%s is not a kubeconfig clusterctl can merge into: %v", into, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	user := cluster + "-admin"
	dst.Clusters[cluster] = src.Clusters[ctx.Cluster]
	dst.AuthInfos[user] = src.AuthInfos[ctx.AuthInfo]
	dst.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	dst.CurrentContext = cluster
	out, err := clientcmd.Write(*dst)
	if err != nil {
		return err
	}
	if err := statedir.WriteFile(into, out, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "merged cluster %q into %s as context %q (now current)\n", cluster, into, cluster)
	return nil
}

func newKubeconfigUserCmd(g *globalOptions) *cobra.Command {
	var groups []string
	var ttl time.Duration
	var out string
	cmd := &cobra.Command{
		Use:   "user NAME",
		Short: "Issue a kubeconfig for a user: a client certificate signed by the cluster CA, as kubeadm kubeconfig user does",
		Long: `Issue a kubeconfig whose client certificate, signed here by the cluster CA of the state directory, names
NAME as the user (its common name) and each --group as a group (its organizations). Nothing is created in
the cluster: grant the user or group what it may do with RBAC (kubectl create rolebinding ...). The
certificate cannot be revoked before it expires: keep --ttl short. system:masters is refused (break-glass
access is the state directory's super-admin.conf).

The kubeconfig holds the user's private key: it goes to stdout, or to --out FILE, written 0600 and never
over an existing file.`,
		Example: `  clusterctl kubeconfig user alice --group developers -i hosts.yaml --out alice.conf
  kubectl create clusterrolebinding developers-view --clusterrole view --group developers
  kubectl --kubeconfig alice.conf auth whoami`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			name := args[0]
			if strings.TrimSpace(name) == "" || strings.ContainsFunc(name, isControl) {
				return usageError("user NAME %q: give a user name (no control characters)", name)
			}
			for _, gr := range groups {
				if strings.TrimSpace(gr) == "" || strings.ContainsFunc(gr, isControl) {
					return usageError("--group %q: give a group name (no control characters)", gr)
				}
			}
			if slices.Contains(groups, pki.SystemMasters) {
				return usageError("--group %s is refused: a certificate of it cannot be limited or revoked (super-admin.conf in the state directory is the break-glass access)", pki.SystemMasters)
			}
			if ttl <= 0 {
				return usageError("--ttl must be positive, got %s", ttl)
			}
			inv, state, _, err := loadWithState(g, stateCluster)
			if err != nil {
				return err
			}
			data, err := userKubeconfig(inv, state, name, groups, ttl)
			if err != nil {
				return err
			}
			if wrote, err := writeOut(g, out, data, 0o600, "a user's kubeconfig is never written over a file"); !wrote || err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "wrote %s: user %q, groups [%s], valid for %s\n", out, name, strings.Join(groups, ", "), ttl)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&groups, "group", nil, "a group the user is in (repeatable, or comma-separated)")
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the certificate is valid (cut to the CA's own expiry)")
	cmd.Flags().StringVar(&out, "out", "", "the file to write, 0600 (default: stdout)")
	return cmd
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// userKubeconfig signs a client certificate for name in groups with the state directory's CA and builds a
// kubeconfig with the admin kubeconfig's server and the CA data it trusts.
func userKubeconfig(inv *inventory.Inventory, state, name string, groups []string, ttl time.Duration) ([]byte, error) {
	caCert, err := os.ReadFile(filepath.Join(state, "pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	caKey, err := pki.ReadSecret(filepath.Join(state, "pki", "ca.key"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usageError("the state directory holds no CA key (an external CA): sign the user's certificate with it")
	}
	if err != nil {
		return nil, err
	}
	cert, err := pki.ParseCert(caCert)
	if err != nil {
		return nil, err
	}
	key, err := pki.ParseKey(caKey)
	if err != nil {
		return nil, err
	}
	admin, err := pki.ReadSecret(filepath.Join(state, "admin.conf"))
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return nil, fmt.Errorf("admin.conf: %w", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil {
		return nil, errors.New("admin.conf has no usable current context")
	}
	server := cfg.Clusters[ctx.Cluster]
	is := &pki.Issuer{Algorithm: pki.Algorithm(inv.Cluster.Certificates.KeyAlgorithm), Validity: ttl}
	id := kubeconfig.Identity{User: name, CommonName: name, Organization: groups, Server: server.Server}
	kp, err := is.NewLeaf(pki.Spec{Name: name, CA: "ca", CommonName: name, Organization: groups,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, &pki.KeyPair{Cert: cert, Key: key}, nil)
	if err != nil {
		return nil, err
	}
	return kubeconfig.Build(inv.Cluster.Name, id, server.CertificateAuthorityData, kp)
}
