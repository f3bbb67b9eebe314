package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
		Args: noArgs,
		// a kubeconfig is a document of its own: no JSON lines around it
		Annotations: map[string]string{outputsAnnotation: "text"},
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
