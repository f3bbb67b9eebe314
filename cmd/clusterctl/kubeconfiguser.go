package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeconfig"
	"github.com/clusterctl/clusterctl/tasks/pki"
)

// userOptions are kubeconfig user's flags.
type userOptions struct {
	groups []string
	ttl    time.Duration
	out    string
	force  bool
}

func newKubeconfigUserCmd(g *globalOptions) *cobra.Command {
	var o userOptions
	cmd := &cobra.Command{
		Use:   "user NAME",
		Short: "Issue a kubeconfig for a user: a client certificate signed by the cluster CA, as kubeadm kubeconfig user does",
		Long: `Issue a kubeconfig whose client certificate, signed here by the cluster CA of the state directory, names
NAME as the user (its common name) and each --group as a group (its organizations). Nothing is created in
the cluster: grant the user or group what it may do with RBAC (kubectl create rolebinding ...).

A user certificate cannot be revoked: it is valid until it expires. Keep --ttl short (at most 8760h). To cut
off a leaked one before then, remove what RBAC grants its user and groups (the certificate then
authenticates but may do nothing), or replace the cluster CA (clusterctl certs rotate --ca), which ends
every certificate it signed.

Names Kubernetes and kubeadm keep for their own identities are refused: user names and groups under
system: (system:node:NAME is a Node's kubelet, which RBAC cannot revoke; system:serviceaccount:... a
service account's), the user kube-apiserver-kubelet-client (the API server's access to every kubelet) and
the group kubeadm:cluster-admins (cluster-admin). --force issues them anyway, saying what they grant.
system:masters is refused even then (break-glass access is the state directory's super-admin.conf).

Every certificate issued is recorded in the state directory (serial, user, groups, expiry, who and
when): clusterctl kubeconfig user list shows them. The kubeconfig holds the user's private key: it goes
to stdout, or to --out FILE, written 0600 and never over an existing file.`,
		Example: `  clusterctl kubeconfig user alice --group developers -i hosts.yaml --out alice.conf
  kubectl create clusterrolebinding developers-view --clusterrole view --group developers
  kubectl --kubeconfig alice.conf auth whoami
  clusterctl kubeconfig user list -i hosts.yaml`,
		Annotations: map[string]string{outputsAnnotation: "text"}, // a kubeconfig is a document of its own
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("%s takes one user name, got %d arguments: clusterctl kubeconfig user alice --group developers -i hosts.yaml --out alice.conf", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error { return o.run(g, args[0]) },
	}
	cmd.Flags().StringSliceVar(&o.groups, "group", nil, "a group the user is in (repeatable, or comma-separated)")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 24*time.Hour, "how long the certificate is valid, at most 8760h (cut to the CA's own expiry)")
	cmd.Flags().StringVar(&o.out, "out", "", "the file to write, 0600 (default: stdout)")
	cmd.Flags().BoolVar(&o.force, "force", false, "issue a name or group Kubernetes keeps for its own identities (system:..., kube-apiserver-kubelet-client, kubeadm:cluster-admins), saying what it grants")
	cmd.AddCommand(newKubeconfigUserListCmd(g))
	return cmd
}

// validate checks the user name and the flags, and returns what a reserved name or group would grant.
func (o *userOptions) validate(name string) ([]string, error) {
	if strings.TrimSpace(name) == "" || strings.ContainsFunc(name, isControl) {
		return nil, usageError("user NAME %q: give a user name (no control characters)", name)
	}
	for _, gr := range o.groups {
		if strings.TrimSpace(gr) == "" || strings.ContainsFunc(gr, isControl) {
			return nil, usageError("--group %q: give a group name (no control characters)", gr)
		}
	}
	if slices.Contains(o.groups, pki.SystemMasters) {
		return nil, usageError("--group %s is refused: a certificate of it cannot be limited or revoked (super-admin.conf in the state directory is the break-glass access)", pki.SystemMasters)
	}
	grants := reservedGrants(name, o.groups)
	if len(grants) > 0 && !o.force {
		return nil, usageError("refused: %s; give --force to issue it anyway", strings.Join(grants, "; "))
	}
	if o.ttl <= 0 || o.ttl > kubeconfig.MaxUserTTL {
		return nil, usageError("--ttl %s: give a duration above 0 and at most %s (the certificate cannot be revoked before it expires)", o.ttl, kubeconfig.MaxUserTTL)
	}
	if o.out != "" {
		if _, err := os.Lstat(o.out); err == nil {
			return nil, usageError("%s exists: a user's kubeconfig is never written over a file", o.out)
		}
	}
	return grants, nil
}

// run issues the user's certificate, records it, and writes the kubeconfig.
func (o *userOptions) run(g *globalOptions, name string) error {
	grants, err := o.validate(name)
	if err != nil {
		return err
	}
	inv, state, _, err := loadWithState(g, stateCluster)
	if err != nil {
		return err
	}
	for _, gr := range grants {
		fmt.Fprintf(g.stderr, "warning: --force: %s\n", gr)
	}
	data, cert, ca, err := userKubeconfig(inv, state, name, o.groups, o.ttl)
	if err != nil {
		return err
	}
	// Recorded before it leaves: no certificate is out that the record lacks.
	if err := kubeconfig.RecordIssued(state, kubeconfig.Issued{Serial: cert.SerialNumber.Text(16), User: name, Groups: o.groups,
		NotAfter: cert.NotAfter.UTC(), IssuedAt: time.Now().UTC().Truncate(time.Second), IssuedBy: whoAmI(), Forced: len(grants) > 0}); err != nil {
		return err
	}
	if _, err := writeOut(g, o.out, data, 0o600, "a user's kubeconfig is never written over a file"); err != nil {
		return err
	}
	until := cert.NotAfter.UTC().Format(time.RFC3339)
	if cert.NotAfter.Equal(ca.NotAfter) {
		until += fmt.Sprintf(" (cut to the cluster CA's expiry: %s from now, not the %s asked for)", time.Until(cert.NotAfter).Round(time.Hour), o.ttl)
	}
	where := o.out
	if where == "" {
		where = "the kubeconfig"
	}
	fmt.Fprintf(g.stderr, "wrote %s: user %q, groups [%s], serial %s, valid until %s\n", where, name, strings.Join(o.groups, ", "), cert.SerialNumber.Text(16), until)
	return nil
}

// reservedGrants says, for each of the user name and groups that is one Kubernetes or kubeadm keeps for
// its own identities, what it would grant.
func reservedGrants(name string, groups []string) []string {
	var out []string
	if what := kubeconfig.Grant(name, false); what != "" {
		out = append(out, fmt.Sprintf("user %q grants %s", name, what))
	}
	for _, gr := range groups {
		if what := kubeconfig.Grant(gr, true); what != "" {
			out = append(out, fmt.Sprintf("group %q grants %s", gr, what))
		}
	}
	return out
}

// whoAmI names the workstation's user and host, for the record of issued certificates.
func whoAmI() string {
	name := "uid " + fmt.Sprint(os.Getuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return name + "@" + host
}

func newKubeconfigUserListCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the user certificates clusterctl issued for the cluster, from the state directory's record",
		Long: `List every user certificate kubeconfig user issued for the cluster from this state directory: serial,
user, groups, expiry (expired ones marked), who issued it and when. With -o json, one JSON object.`,
		Example: `  clusterctl kubeconfig user list -i hosts.yaml
  clusterctl kubeconfig user list -i hosts.yaml -o json`,
		Args: noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			_, state, _, err := loadWithState(g, stateCluster)
			if err != nil {
				return err
			}
			issued, err := kubeconfig.LoadIssued(state)
			if err != nil {
				return err
			}
			if g.Output == "json" {
				if issued == nil {
					issued = []kubeconfig.Issued{}
				}
				return writeReport(g.stdout, "issued_users", "ok", struct {
					Users []kubeconfig.Issued `json:"users"`
				}{issued})
			}
			if len(issued) == 0 {
				fmt.Fprintln(g.stdout, "no user certificate issued from this state directory")
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SERIAL\tUSER\tGROUPS\tNOT AFTER\tISSUED BY\tISSUED AT")
			now := time.Now()
			for _, i := range issued {
				until := i.NotAfter.Format(time.RFC3339)
				if now.After(i.NotAfter) {
					until += " (expired)"
				}
				user := i.User
				if i.Forced {
					user += " (--force)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", i.Serial, escapeText(user), escapeText(strings.Join(i.Groups, ",")), until, escapeText(i.IssuedBy), i.IssuedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// userKubeconfig signs a client certificate for name in groups with the state directory's CA and builds a
// kubeconfig with the admin kubeconfig's server and the CA data it trusts. It returns the certificate and
// the CA's too.
func userKubeconfig(inv *inventory.Inventory, state, name string, groups []string, ttl time.Duration) (data []byte, cert, ca *x509.Certificate, err error) {
	caCert, err := os.ReadFile(filepath.Join(state, "pki", "ca.crt"))
	if err != nil {
		return nil, nil, nil, err
	}
	caKey, err := pki.ReadSecret(filepath.Join(state, "pki", "ca.key"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, usageError("the state directory holds no CA key (an external CA): sign the user's certificate with it")
	}
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err = pki.ParseCert(caCert)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := pki.ParseKey(caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	admin, err := pki.ReadSecret(filepath.Join(state, "admin.conf"))
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("admin.conf: %w", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil {
		return nil, nil, nil, errors.New("admin.conf has no usable current context")
	}
	server := cfg.Clusters[ctx.Cluster]
	is := &pki.Issuer{Algorithm: pki.Algorithm(inv.Cluster.Certificates.KeyAlgorithm), Validity: ttl}
	id := kubeconfig.Identity{User: name, CommonName: name, Organization: groups, Server: server.Server}
	kp, err := is.NewLeaf(pki.Spec{Name: name, CA: "ca", CommonName: name, Organization: groups,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, &pki.KeyPair{Cert: ca, Key: key}, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	data, err = kubeconfig.Build(inv.Cluster.Name, id, server.CertificateAuthorityData, kp)
	return data, kp.Cert, ca, err
}
