package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/tasks/pki"
)

func newCertsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "certs",
		Short:   "Inspect the cluster's certificates",
		Example: "  clusterctl certs ca-hash -i hosts.yaml",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "ca-hash",
		Short: "Print the CA pin joining nodes check (sha256 of the CA's Subject Public Key Info)",
		Long: `Print "sha256:<hex>" of the cluster CA's DER-encoded Subject Public Key Info (RFC 7469): the value of
kubeadm join's --discovery-token-ca-cert-hash, the same as this openssl pipeline gives:

  openssl x509 -pubkey -in ca.crt | openssl rsa -pubin -outform der 2>/dev/null | \
    openssl dgst -sha256 -hex | sed 's/^.* //'`,
		Example: "  clusterctl certs ca-hash -i hosts.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, state, err := loadWithState(g)
			if err != nil {
				return err
			}
			p := filepath.Join(state, "pki", "ca.crt")
			data, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no CA yet in %s: clusterctl render or up creates it", p)
			}
			if err != nil {
				return err
			}
			cert, err := pki.ParseCert(data)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			_, err = fmt.Fprintln(g.stdout, pki.CAHash(cert))
			return err
		},
	})
	return cmd
}
