// Package kubeconfig writes the kubeconfig files kubeadm writes, each with its own client certificate
// signed by the cluster CA: admin.conf (kubeadm:cluster-admins, bound to cluster-admin at bootstrap),
// super-admin.conf (system:masters, for break-glass use), controller-manager.conf, scheduler.conf, and the
// kubelet.conf of control-plane nodes (system:node:<name> in system:nodes).
package kubeconfig

import (
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/clusterctl/clusterctl/tasks/pki"
)

// Identity is one kubeconfig: its file name, the user it authenticates as, and the server it talks to.
type Identity struct {
	File         string
	User         string // the kubeconfig's user name (kubernetes-admin, system:node:cp1, ...)
	CommonName   string
	Organization []string
	Server       string // https://host:port
}

// Identities returns the kubeconfigs of a control-plane node as current kubeadm makes them: the admin ones
// and the kubelet's talk to the control-plane endpoint, the controller-manager and scheduler to their own
// node's API server.
func Identities(nodeName, endpoint, local string, superAdmin bool) []Identity {
	ids := []Identity{
		{File: "admin.conf", User: "kubernetes-admin", CommonName: "kubernetes-admin", Organization: []string{pki.ClusterAdminsGroup}, Server: endpoint},
		{File: "controller-manager.conf", User: "system:kube-controller-manager", CommonName: "system:kube-controller-manager", Server: local},
		{File: "scheduler.conf", User: "system:kube-scheduler", CommonName: "system:kube-scheduler", Server: local},
		{File: "kubelet.conf", User: "system:node:" + nodeName, CommonName: "system:node:" + nodeName, Organization: []string{pki.NodesGroup}, Server: endpoint},
	}
	if superAdmin {
		ids = append(ids, Identity{File: "super-admin.conf", User: "kubernetes-super-admin", CommonName: "kubernetes-super-admin",
			Organization: []string{pki.SystemMasters}, Server: endpoint})
	}
	return ids
}

// Spec is the certificate spec of an identity.
func (id Identity) Spec() pki.Spec {
	return pki.Spec{Name: id.File, CA: "ca", CommonName: id.CommonName, Organization: id.Organization,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// Build makes the kubeconfig of an identity with the CA and client certificate embedded.
func Build(clusterName string, id Identity, caPEM []byte, kp *pki.KeyPair) ([]byte, error) {
	keyPEM, err := pki.EncodeKey(kp.Key)
	if err != nil {
		return nil, err
	}
	ctx := id.User + "@" + clusterName
	cfg := &clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{clusterName: {Server: id.Server, CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{id.User: {ClientCertificateData: pki.EncodeCert(kp.Cert), ClientKeyData: keyPEM}},
		Contexts:       map[string]*clientcmdapi.Context{ctx: {Cluster: clusterName, AuthInfo: id.User}},
		CurrentContext: ctx,
	}
	return clientcmd.Write(*cfg)
}

// OtherTrust is Check's answer for a kubeconfig whose client certificate is right but whose CA data is not
// caPEM: it can be rewritten with the same certificate.
const OtherTrust = "trusts other CA data"

// Check says how an existing kubeconfig differs from what it should be, or "" when it is right: the server,
// its client certificate (subject, signed by ca, not expiring within the renewal window), and the CA data it
// trusts (caPEM: the CA, or a bundle during a CA rotation). The key pair is returned whenever the certificate
// is right.
func Check(data []byte, clusterName string, id Identity, ca *x509.Certificate, caPEM []byte, now time.Time, renewBefore time.Duration) (*pki.KeyPair, string) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, "unreadable: " + err.Error()
	}
	cl, ok := cfg.Clusters[clusterName]
	if !ok {
		return nil, "no cluster " + clusterName
	}
	if cl.Server != id.Server {
		return nil, fmt.Sprintf("server %s, want %s", cl.Server, id.Server)
	}
	ai, ok := cfg.AuthInfos[id.User]
	if !ok {
		return nil, "no user " + id.User
	}
	cert, err := pki.ParseCert(ai.ClientCertificateData)
	if err != nil {
		return nil, "no client certificate"
	}
	key, err := pki.ParseKey(ai.ClientKeyData)
	if err != nil {
		return nil, "no client key"
	}
	switch {
	case cert.Subject.CommonName != id.CommonName || !slices.Equal(cert.Subject.Organization, id.Organization):
		return nil, "another identity"
	case cert.CheckSignatureFrom(ca) != nil:
		return nil, "client certificate not signed by the cluster CA"
	case now.Add(renewBefore).After(cert.NotAfter):
		return nil, "client certificate expires on " + cert.NotAfter.Format(time.RFC3339)
	}
	kp := &pki.KeyPair{Cert: cert, Key: key}
	if string(cl.CertificateAuthorityData) != string(caPEM) {
		return kp, OtherTrust
	}
	return kp, ""
}

// Repoint makes every cluster of a kubeconfig (a worker's kubelet.conf, which its kubelet wrote) talk to
// server and trust caPEM, and reports whether that changed anything; an unchanged file comes back as is.
func Repoint(data []byte, server string, caPEM []byte) ([]byte, bool, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, false, err
	}
	changed := false
	for _, cl := range cfg.Clusters {
		if cl.Server != server || !slices.Equal(cl.CertificateAuthorityData, caPEM) || cl.CertificateAuthority != "" {
			cl.Server, cl.CertificateAuthorityData, cl.CertificateAuthority = server, caPEM, ""
			changed = true
		}
	}
	if !changed {
		return data, false, nil
	}
	out, err := clientcmd.Write(*cfg)
	return out, true, err
}
