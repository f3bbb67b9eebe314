package inventory

import (
	"net/url"
	"regexp"
	"strings"
)

// This file holds cluster.apiServer.oidc: users signed in with an OpenID Connect identity provider's ID
// tokens, as the API server's structured authentication configuration has it.

// OIDC is an OpenID Connect identity provider whose ID tokens the API servers take as users.
type OIDC struct {
	// IssuerURL is the provider's issuer (https://, what its tokens' iss claim says); the API servers
	// fetch its discovery document and signing keys from there.
	IssuerURL string `yaml:"issuerURL" json:"issuerURL"`
	// ClientID is the audience tokens must be issued for (their aud claim).
	ClientID string `yaml:"clientID" json:"clientID"`
	// UsernameClaim is the claim that names the user (default sub).
	UsernameClaim string `yaml:"usernameClaim,omitempty" json:"usernameClaim,omitempty"`
	// UsernamePrefix is put before every user name, so that none can pass for a user of the cluster's
	// own (default "oidc:"; "-" for none).
	UsernamePrefix string `yaml:"usernamePrefix,omitempty" json:"usernamePrefix,omitempty"`
	// GroupsClaim is the claim that lists the user's groups (none when left out).
	GroupsClaim string `yaml:"groupsClaim,omitempty" json:"groupsClaim,omitempty"`
	// GroupsPrefix is put before every group (default "oidc:"; "-" for none), so that none is a group
	// of the cluster's own such as system:masters.
	GroupsPrefix string `yaml:"groupsPrefix,omitempty" json:"groupsPrefix,omitempty"`
	// CAFile is a PEM file of the CA that signed the provider's certificate, relative to the inventory's
	// directory (default: the hosts' trusted CAs).
	CAFile string `yaml:"caFile,omitempty" json:"caFile,omitempty"`
}

// Defaults of cluster.apiServer.oidc.
const (
	DefaultOIDCUsernameClaim = "sub"
	DefaultOIDCPrefix        = "oidc:"
	// NoOIDCPrefix is the prefix that says none.
	NoOIDCPrefix = "-"
)

func (o *OIDC) applyDefaults() {
	setString(&o.UsernameClaim, DefaultOIDCUsernameClaim)
	setString(&o.UsernamePrefix, DefaultOIDCPrefix)
	setString(&o.GroupsPrefix, DefaultOIDCPrefix)
}

// Prefix is a prefix as the API server takes it: NoOIDCPrefix is none.
func (o *OIDC) Prefix(p string) string {
	if p == NoOIDCPrefix {
		return ""
	}
	return p
}

// claimRE is a claim's name: letters, digits and what URL-named claims hold.
var claimRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:/#-]{0,255}$`)

// oidc checks cluster.apiServer.oidc, and that the API server's extraArgs do not configure
// authentication besides it.
func (v *validator) oidc(a *APIServer) {
	o := a.OIDC
	if o == nil {
		return
	}
	const key = "cluster.apiServer.oidc"
	u, err := url.Parse(o.IssuerURL)
	switch {
	case o.IssuerURL == "":
		v.errorf(key+".issuerURL", "the identity provider's issuer URL is required (https://...)")
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(o.IssuerURL) > 2048:
		v.errorf(key+".issuerURL", "%q is not an issuer URL: https://, a host, an optional path, no user, query or fragment", o.IssuerURL)
	}
	if o.ClientID == "" || len(o.ClientID) > 256 || strings.ContainsAny(o.ClientID, " \t") {
		v.errorf(key+".clientID", "%q: the client ID tokens are issued for, without spaces, at most 256 characters", o.ClientID)
	}
	for _, c := range []struct{ name, v string }{{"usernameClaim", o.UsernameClaim}, {"groupsClaim", o.GroupsClaim}} {
		if c.v != "" && !claimRE.MatchString(c.v) {
			v.errorf(key+"."+c.name, "%q is not a claim name (letters, digits, '_', '.', ':', '/', '#', '-')", c.v)
		}
	}
	for _, p := range []struct{ name, v string }{{"usernamePrefix", o.UsernamePrefix}, {"groupsPrefix", o.GroupsPrefix}} {
		if len(p.v) > 64 || strings.ContainsAny(p.v, " \t") {
			v.errorf(key+"."+p.name, "%q: a prefix of at most 64 characters without spaces (\"-\" for none)", p.v)
		}
	}
	if o.Prefix(o.UsernamePrefix) == "" && o.UsernameClaim != "email" {
		// An unprefixed claim other than email could name a user of the cluster's own.
		v.report(Warning, key+".usernamePrefix", "none: a token whose %s claim is a cluster user's name (system:...) signs in as that user", o.UsernameClaim)
	}
	if strings.ContainsRune(o.CAFile, 0) || len(o.CAFile) > 4096 {
		v.errorf(key+".caFile", "%q is not a file path", o.CAFile)
	}
	for _, arg := range a.ExtraArgs {
		if arg.Name == "authentication-config" || strings.HasPrefix(arg.Name, "oidc-") {
			v.errorf("cluster.apiServer.extraArgs."+arg.Name, "cannot be given beside cluster.apiServer.oidc, which the API server takes as its --authentication-config")
		}
	}
}
