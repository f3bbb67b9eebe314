package kubeconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// MaxUserTTL is the longest a user's certificate may be valid: it cannot be revoked before it expires.
const MaxUserTTL = 8760 * time.Hour

// Grant says what a user name or group of a kubeconfig user would grant when it is one Kubernetes or
// kubeadm keeps for its own identities ("" when it is an ordinary name). Names under system: are the
// components', nodes' and service accounts'; kube-apiserver-kubelet-client is the API server's identity
// to every kubelet; kubeadm:cluster-admins is bound to cluster-admin.
func Grant(name string, group bool) string {
	switch {
	case group && name == "system:masters":
		return "every permission, past any authorization (no RBAC can limit or revoke it)"
	case group && name == "kubeadm:cluster-admins":
		return "cluster-admin (kubeadm's binding of this group)"
	case !group && name == "kube-apiserver-kubelet-client":
		return "the API server's identity to every kubelet (system:kubelet-api-admin: exec, logs, port-forward on every node)"
	case !group && strings.HasPrefix(name, "system:node:"):
		return fmt.Sprintf("Node %s's kubelet identity: the Node authorizer and NodeRestriction let it act as that node; RBAC cannot revoke it", strings.TrimPrefix(name, "system:node:"))
	case group && name == "system:nodes":
		return "the nodes' group (the Node authorizer's rules for kubelets)"
	case !group && strings.HasPrefix(name, "system:serviceaccount:"):
		return fmt.Sprintf("ServiceAccount %s's identity, and whatever is bound to it", strings.TrimPrefix(name, "system:serviceaccount:"))
	case group && strings.HasPrefix(name, "system:serviceaccounts"):
		return "the service accounts' group " + name + ", and whatever is bound to it"
	case !group && (name == "system:kube-controller-manager" || name == "system:kube-scheduler" || name == "system:kube-proxy"):
		return fmt.Sprintf("the identity of %s, and its RBAC roles", strings.TrimPrefix(name, "system:"))
	case strings.HasPrefix(name, "system:"):
		return "a name Kubernetes reserves for its own components and groups, and whatever is bound to it"
	}
	return ""
}

// IssuedFile records, in the state directory, every user certificate clusterctl issued.
const IssuedFile = "issued-users.json"

const maxIssuedFile = 16 << 20

// Issued is one user certificate clusterctl issued.
type Issued struct {
	Serial   string    `json:"serial"` // hexadecimal
	User     string    `json:"user"`
	Groups   []string  `json:"groups"`
	NotAfter time.Time `json:"notAfter"`
	IssuedAt time.Time `json:"issuedAt"`
	IssuedBy string    `json:"issuedBy"` // the workstation's user@host
	Forced   bool      `json:"forced,omitempty"`
}

// LoadIssued reads the state directory's record (none yet: an empty one).
func LoadIssued(stateDir string) ([]Issued, error) {
	path := filepath.Join(stateDir, IssuedFile)
	data, err := statedir.ReadFile(path, maxIssuedFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Issued
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// RecordIssued appends a certificate to the state directory's record (0600, atomically).
func RecordIssued(stateDir string, i Issued) error {
	all, err := LoadIssued(stateDir)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(append(all, i), "", "  ")
	if err != nil {
		return err
	}
	return statedir.WriteFile(filepath.Join(stateDir, IssuedFile), append(data, '\n'), 0o600)
}
