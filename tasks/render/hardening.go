package render

import (
	"github.com/clusterctl/clusterctl/tasks/hardening"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// maxConfigFile bounds the read of an audit policy or webhook kubeconfig of the inventory's.
const maxConfigFile = 1 << 20

// hardening makes the API server's configuration files: the encryption keys made (once, in the state
// directory) or kept, the inventory's audit policy and webhook and its identity provider's CA read and
// checked.
func (r *renderer) hardening() error {
	c, o := r.c, r.o
	keys, created, err := hardening.LoadKeys(o.StateDir, o.Now())
	if err != nil {
		return err
	}
	if created {
		r.res.Changes = append(r.res.Changes, pki.Change{What: hardening.KeysFile, Action: "created"})
	}
	p := hardening.Params{Security: c.Security, Keys: keys}
	if f := c.Security.Audit.Policy; f != "" {
		file := o.Inv.Resolve(f)
		if p.AuditPolicy, err = statedir.ReadFile(file, maxConfigFile); err != nil {
			return err
		}
		if err := hardening.CheckAuditPolicy(file, p.AuditPolicy); err != nil {
			return err
		}
	}
	if f := c.Security.Audit.Webhook; f != "" {
		file := o.Inv.Resolve(f)
		if p.AuditWebhook, err = statedir.ReadFile(file, maxConfigFile); err != nil {
			return err
		}
		if err := hardening.CheckAuditWebhook(file, p.AuditWebhook); err != nil {
			return err
		}
	}
	if p.OIDC = c.APIServer.OIDC; p.OIDC != nil && p.OIDC.CAFile != "" {
		file := o.Inv.Resolve(p.OIDC.CAFile)
		if p.OIDCCA, err = statedir.ReadFile(file, maxConfigFile); err != nil {
			return err
		}
		if err := hardening.CheckCA(file, p.OIDCCA); err != nil {
			return err
		}
	}
	r.apiServerFiles, err = hardening.Files(p)
	return err
}
