package hardening

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
)

// AuthenticationConfig is the API server's structured authentication configuration
// (apiserver.config.k8s.io/v1 AuthenticationConfiguration, --authentication-config) of the inventory's
// identity provider: its issuer, audience and CA, and which claims name the user and their groups, with
// their prefixes. The API server reads it again when it changes.
func AuthenticationConfig(o *inventory.OIDC, caPEM []byte) ([]byte, error) {
	prefix := func(p string) *string { s := o.Prefix(p); return &s }
	jwt := apiserverv1.JWTAuthenticator{
		Issuer: apiserverv1.Issuer{URL: o.IssuerURL, Audiences: []string{o.ClientID}, CertificateAuthority: string(caPEM)},
		ClaimMappings: apiserverv1.ClaimMappings{
			Username: apiserverv1.PrefixedClaimOrExpression{Claim: o.UsernameClaim, Prefix: prefix(o.UsernamePrefix)},
		},
	}
	if o.GroupsClaim != "" {
		jwt.ClaimMappings.Groups = apiserverv1.PrefixedClaimOrExpression{Claim: o.GroupsClaim, Prefix: prefix(o.GroupsPrefix)}
	}
	return yaml.Marshal(apiserverv1.AuthenticationConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "AuthenticationConfiguration"},
		JWT:      []apiserverv1.JWTAuthenticator{jwt},
	})
}

// CheckCA checks that a file holds PEM CA certificates and nothing else, for the API server to verify an
// identity provider with.
func CheckCA(file string, data []byte) error {
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fileError("apiServer.oidc.caFile", file, fmt.Errorf("a %s block: only CERTIFICATE blocks belong in a CA file", b.Type))
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fileError("apiServer.oidc.caFile", file, err)
		}
		if !c.IsCA {
			return fileError("apiServer.oidc.caFile", file, fmt.Errorf("%q is not a CA certificate", c.Subject.String()))
		}
		n++
	}
	if n == 0 {
		return fileError("apiServer.oidc.caFile", file, errors.New("no PEM certificate"))
	}
	return nil
}
