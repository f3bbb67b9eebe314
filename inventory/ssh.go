package inventory

// The SSH settings of the model: the inventory's, a host's override, jump hosts and pinned host keys.

// SSH holds how clusterctl reaches hosts; each host may override the connection settings.
type SSH struct {
	// User is the user clusterctl logs in as.
	User string `yaml:"user" json:"user"`
	// Port is the hosts' SSH port.
	Port int `yaml:"port" json:"port"`
	// IdentityFiles are private keys to offer, beside the ssh-agent's; none given: the IdentityFile lines
	// ~/.ssh/config has for the host.
	IdentityFiles []string `yaml:"identityFiles,omitempty" json:"identityFiles,omitempty"`
	// Agent says whether to use the ssh-agent at $SSH_AUTH_SOCK.
	Agent *bool `yaml:"agent,omitempty" json:"agent,omitempty"`
	// KnownHosts are the files host keys are verified against, after the cluster's own known_hosts.
	KnownHosts []string `yaml:"knownHosts,omitempty" json:"knownHosts,omitempty"`
	// Bastions is the chain of jump hosts, the first dialled first.
	Bastions []Bastion `yaml:"bastions,omitempty" json:"bastions,omitempty"`
	// Become runs commands through sudo; the default is true for any user but root.
	Become *bool `yaml:"become,omitempty" json:"become,omitempty"`
}

// Bastion is one jump host.
type Bastion struct {
	// Address is the jump host's IP address or DNS name.
	Address string `yaml:"address" json:"address"`
	// Port is its SSH port (default: ~/.ssh/config's for it, else 22).
	Port int `yaml:"port,omitempty" json:"port,omitempty"`
	// User is the user to log in as there (default the hosts' user).
	User string `yaml:"user,omitempty" json:"user,omitempty"`
	// IdentityFiles are the keys to offer it (default the hosts').
	IdentityFiles []string `yaml:"identityFiles,omitempty" json:"identityFiles,omitempty"`
	// HostKey pins its host key as a host's (a SHA256 fingerprint, or a list of them).
	HostKey HostKeys `yaml:"hostKey,omitempty" json:"hostKey,omitempty"`
}

// HostSSH overrides the inventory's SSH settings for one host.
type HostSSH struct {
	// User is the user clusterctl logs in as on this host.
	User string `yaml:"user,omitempty" json:"user,omitempty"`
	// Port is this host's SSH port.
	Port int `yaml:"port,omitempty" json:"port,omitempty"`
	// IdentityFiles are the keys to offer this host, in place of the inventory's.
	IdentityFiles []string `yaml:"identityFiles,omitempty" json:"identityFiles,omitempty"`
	// Become runs this host's commands through sudo (default: for any user but root).
	Become *bool `yaml:"become,omitempty" json:"become,omitempty"`
	// HostKey pins the host's keys by fingerprint ("SHA256:..."), as ssh-keygen -lf prints it: one, or a list
	// (one per key type the host has).
	HostKey HostKeys `yaml:"hostKey,omitempty" json:"hostKey,omitempty"`
	// Bastions replaces the inventory's chain for this host; an empty list keeps it.
	Bastions []Bastion `yaml:"bastions,omitempty" json:"bastions,omitempty"`
}

// IsZero lets omitempty drop an empty override.
func (s HostSSH) IsZero() bool {
	return s.User == "" && s.Port == 0 && len(s.IdentityFiles) == 0 && s.Become == nil && len(s.HostKey) == 0 &&
		len(s.Bastions) == 0
}

// HostKeys are pinned SSH host key fingerprints: written as one string or as a list of them.
type HostKeys []string

// MarshalYAML writes one pin as a string, several as a list.
func (k HostKeys) MarshalYAML() (any, error) {
	if len(k) == 1 {
		return k[0], nil
	}
	return []string(k), nil
}
