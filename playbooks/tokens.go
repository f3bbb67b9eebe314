package playbooks

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// tokensFile keeps, in the state directory, the bootstrap tokens of a run (one per joining host) until
// their nodes have registered.
const tokensFile = "bootstrap-tokens.json"

// loadTokens gives each joining host a bootstrap token of its own: an interrupted run's while it has time
// left, or a new one. They are kept in the state directory (0600) so that a re-run joins with the same
// tokens, and the approver knows which host each was issued to.
func (d *deployment) loadTokens(p *plan) error {
	file := filepath.Join(d.e.StateDir, tokensFile)
	// The one token of every host that earlier versions kept.
	if err := os.Remove(filepath.Join(d.e.StateDir, "bootstrap-token")); err != nil && !os.IsNotExist(err) {
		return err
	}
	kept := map[string]bootstrap.Token{}
	if data, err := os.ReadFile(file); err == nil {
		if kept, err = bootstrap.ParseTokens(data); err != nil {
			return fmt.Errorf("%s: %w (remove it: its tokens are made anew)", file, err)
		}
	}
	d.tokens = map[string]bootstrap.Token{}
	for name := range p.joining {
		if t, ok := kept[name]; ok && t.Expires.Sub(d.o.Now()) > d.o.TokenTTL/2 {
			d.tokens[name] = t
			continue
		}
		t, err := bootstrap.NewToken(name, d.o.Now(), d.o.TokenTTL)
		if err != nil {
			return err
		}
		d.tokens[name] = t
	}
	if d.approver != nil {
		d.approver.Joining = map[string]string{}
		for name, t := range d.tokens {
			d.approver.Joining[t.ID] = d.e.Inv.Host(name).NodeName
		}
	}
	return d.saveTokens()
}

// saveTokens writes the tokens still to be used to the state directory, or removes the file when none is.
func (d *deployment) saveTokens() error {
	file := filepath.Join(d.e.StateDir, tokensFile)
	if len(d.tokens) == 0 {
		if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	data, err := bootstrap.MarshalTokens(d.tokens)
	if err != nil {
		return err
	}
	return statedir.WriteFile(file, data, 0o600)
}

// tokenList are the run's bootstrap tokens, by host name.
func (d *deployment) tokenList() []bootstrap.Token {
	var out []bootstrap.Token
	for _, name := range slices.Sorted(maps.Keys(d.tokens)) {
		out = append(out, d.tokens[name])
	}
	return out
}

// retireTokens deletes the tokens of the hosts done says are done with theirs (their Secrets, their entry
// in the state directory); the approver approves nothing more for them.
func (d *deployment) retireTokens(ctx context.Context, admin *apiclient.Client, done func(host string) bool) error {
	retired := false
	for _, name := range slices.Sorted(maps.Keys(d.tokens)) {
		if !done(name) {
			continue
		}
		t := d.tokens[name]
		err := admin.Kube.CoreV1().Secrets(bootstrap.KubeSystem).Delete(ctx, t.SecretName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		delete(d.tokens, name)
		delete(d.approver.Joining, t.ID)
		retired = true
	}
	if !retired {
		return nil
	}
	return d.saveTokens()
}
