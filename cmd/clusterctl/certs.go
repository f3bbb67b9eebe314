package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/certs"
	"github.com/clusterctl/clusterctl/tasks/pki"
)

func newCertsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "certs",
		Short:   "Check the certificates of every host, renew the control plane's, print the CA pin",
		Example: "  clusterctl certs check-expiration -i hosts.yaml --fail-within 30d\n  clusterctl certs ca-hash -i hosts.yaml",
	}
	cmd.AddCommand(newCheckExpirationCmd(g), newRotateCmd(g))
	cmd.AddCommand(&cobra.Command{
		Use:   "ca-hash",
		Short: "Print the CA pin joining nodes check (sha256 of the CA's Subject Public Key Info)",
		Long: `Print "sha256:<hex>" of the cluster CA's DER-encoded Subject Public Key Info (RFC 7469): the value of
kubeadm join's --discovery-token-ca-cert-hash, the same as this openssl pipeline gives:

  openssl x509 -pubkey -in ca.crt | openssl rsa -pubin -outform der 2>/dev/null | \
    openssl dgst -sha256 -hex | sed 's/^.* //'`,
		Example: "  clusterctl certs ca-hash -i hosts.yaml\n  clusterctl certs ca-hash -i hosts.yaml -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, state, _, err := loadWithState(g, stateExisting)
			if err != nil {
				return err
			}
			p := filepath.Join(state, "pki", "ca.crt")
			data, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return usageError("no CA yet in %s: clusterctl render or up creates it", p)
			}
			if err != nil {
				return err
			}
			cert, err := pki.ParseCert(data)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if g.Output == "json" {
				return writeReport(g.stdout, "ca_hash", "ok", map[string]string{"caHash": pki.CAHash(cert), "ca": p})
			}
			_, err = fmt.Fprintln(g.stdout, pki.CAHash(cert))
			return err
		},
	})
	return cmd
}

type checkExpirationOptions struct {
	ssh        sshOptions
	failWithin inventory.Duration
}

func newCheckExpirationCmd(g *globalOptions) *cobra.Command {
	o := &checkExpirationOptions{}
	cmd := &cobra.Command{
		Use:   "check-expiration",
		Short: "One table of every certificate on every host, read from the hosts, with expiry and drift",
		Long: `Read, from every host (one command each; certificates only, private keys stay on the hosts), every
certificate under /etc/kubernetes/pki, the client certificate of each kubeconfig in /etc/kubernetes
(admin, super-admin, controller-manager, scheduler, kubelet) and the kubelet's client and serving
certificates; print one table with each one's expiry, residual time, issuing CA, and whether it matches
the state directory's copy (match, differs; blank for what nodes make themselves).

With --fail-within, exit 1 when anything expires sooner (for cron and CI); unreachable hosts exit 1 too.`,
		Example: `  clusterctl certs check-expiration -i hosts.yaml
  clusterctl certs check-expiration -i hosts.yaml --fail-within 30d
  clusterctl certs check-expiration -i hosts.yaml -o json | jq '.certificates[] | select(.state=="differs")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheckExpiration(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	cmd.Flags().Var(&o.failWithin, "fail-within", "exit 1 when a certificate expires within this time (30d, 12h, 1y)")
	return cmd
}

func runCheckExpiration(cmd *cobra.Command, g *globalOptions, o *checkExpirationOptions) error {
	// The table or the JSON report is the output on stdout; with JSON, host events go to stderr as lines.
	view := newEventView(io.Discard, "plain")
	if g.Output == "json" {
		view = newEventView(g.stderr, "plain")
	}
	env, err := openCluster(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer env.Close()
	now := time.Now()
	list, results, err := playbooks.CheckExpiration(cmd.Context(), env, now)
	failedHosts := 0
	for _, r := range results {
		if r.Err != nil {
			failedHosts++
			fmt.Fprintf(g.stderr, "%s: %v\n", r.Host, r.Err)
		}
	}
	if err != nil && failedHosts == 0 {
		return failedOnHosts(err)
	}
	var soon []certs.Cert
	for _, c := range list {
		if o.failWithin.Duration > 0 && c.Cert != nil && c.Residual < o.failWithin.Duration {
			soon = append(soon, c)
		}
	}
	if g.Output == "json" {
		// every host is there: those read with their certificates, the others with why not (monitoring
		// must not see an empty list where a host could not be read)
		unread := []hostError{}
		for _, r := range results {
			if r.Err != nil {
				unread = append(unread, hostError{Host: r.Host, Status: string(r.Status), Error: hostless(r.Host, r.Err.Error())})
			}
		}
		if list == nil {
			list = []certs.Cert{}
		}
		if err := writeReport(g.stdout, "certificates", statusOf(len(soon) == 0 && len(unread) == 0), struct {
			Certificates []certs.Cert `json:"certificates"`
			ExpiringSoon int          `json:"expiringSoon"`
			Unread       []hostError  `json:"unread"`
		}{list, len(soon), unread}); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tCERTIFICATE\tEXPIRES\tRESIDUAL\tCA\tSTATE DIR")
		for _, c := range list {
			if c.Cert == nil {
				fmt.Fprintf(tw, "%s\t%s\t(file %s)\t\t\t\n", c.Host, c.Path, escapeText(c.Reference))
				continue
			}
			st := c.State
			if st == "" {
				st = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Host, c.Path, c.NotAfter.UTC().Format("Jan 02, 2006 15:04 MST"),
				certs.Residual(c.Residual), escapeText(c.Issuer), st)
		}
		tw.Flush()
	}
	if len(soon) > 0 {
		for _, c := range soon {
			fmt.Fprintf(g.stderr, "expires within %s: %s %s (%s)\n", o.failWithin.String(), c.Host, c.Path, certs.Residual(c.Residual))
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("%d certificate(s) expire within %s", len(soon), o.failWithin.String())}
	}
	if failedHosts > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d host(s) could not be read", failedHosts)}
	}
	return nil
}

type rotateOptions struct {
	ssh     sshOptions
	yes     bool
	newKeys bool
	only    []string
	fresh   time.Duration
	timeout time.Duration
	// maxUnavailable: how many workers' kubelets restart at once.
	maxUnavailable int
	ca             bool
	dryRun         bool
}

func newRotateCmd(g *globalOptions) *cobra.Command {
	o := &rotateOptions{}
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Renew the control-plane certificates and kubeconfigs node by node, or (--ca) replace the CAs",
		Long: `Renew, in the state directory, every control-plane leaf certificate (API server, its kubelet, etcd and
front-proxy clients, etcd server, peer and health check) and kubeconfig (admin, super-admin,
controller-manager, scheduler, control-plane kubelets) issued more than --fresh ago, keeping their keys
unless --new-keys; then, one control-plane node at a time, push the node's files and wait until the
kubelet has restarted etcd and the control plane with them (each static Pod manifest carries a digest of
the node's certificates) and they are Ready, and the node's API server is ready, before the next node.
A node whose certificates are already fresh is not touched; a second run right after changes nothing.

Kubelet serving certificates issued more than --fresh ago are requested anew by their kubelets and
approved after the same checks as at join (--only kubelet-serving for these alone). Workers' kubelets
renew their own client certificates (rotation is on).

With --ca, the CAs themselves are replaced (cluster, front-proxy, etcd and kubelet serving CAs, and the
service-account signing key), without downtime on several control-plane nodes, in five stages, each
applied to the whole fleet and recorded in the state directory (the progress in runs/ca-rotation.json,
the new and old CAs in pki/rotation/) so that an interrupted run resumes:
  1 generate  new CAs and key made in the state directory; nothing changes on hosts
  2 trust     every trust bundle holds the old and new CAs (ca.crt, front-proxy-ca.crt, etcd/ca.crt,
              kubelet-serving-ca.crt, kubeconfigs, workers' kubelet.conf, cluster-info, kube-root-ca.crt)
              and tokens of both keys are accepted; Deployments, DaemonSets and StatefulSets whose Pods
              started before are rolled
  3 reissue   every leaf certificate and kubeconfig issued by the new CAs, control-plane node by node;
              the controller-manager signs with the new CAs and tokens with the new key; every kubelet
              gets a client certificate of the new CA
  4 sign      kubelets request new serving certificates (of the new kubelet serving CA) and get new
              tokens for their Pods
  5 finish    once no host presents a certificate of the old CAs, they leave every bundle
The old service-account key stays accepted while legacy token Secrets it signed remain (reported).

Kubelets restart in turn, for their serving certificates and in each --ca stage that restarts them:
control-plane nodes one at a time, then workers --max-unavailable at a time, each batch's Nodes Ready
again, and every Pod that was Ready on them Ready again by its restarted kubelet's word, before the next
batch. A restarted kubelet reports each container with a readiness probe NotReady until that probe runs
once (up to one period), so a Service keeps a ready endpoint throughout when its Pods are spread over
more nodes than a batch, and loses them for that moment when they all share one node.

--dry-run renews a copy of the PKI (made in the state directory and removed after), runs preflight, and
prints what would be renewed and, per host, the files that would change and what would restart; with
--ca it prints the stages and which a run would apply next. Nothing changes on the hosts or in the state
directory.`,
		Example: `  clusterctl certs rotate -i hosts.yaml --dry-run
  clusterctl certs rotate -i hosts.yaml --yes
  clusterctl certs rotate -i hosts.yaml --only apiserver,admin.conf --new-keys --yes
  clusterctl certs rotate -i hosts.yaml --ca --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRotate(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.newKeys, "new-keys", false, "make new private keys instead of keeping the current ones")
	cmd.Flags().StringSliceVar(&o.only, "only", nil, "renew only these (leaf names such as apiserver, etcd-server; kubeconfig files such as admin.conf)")
	cmd.Flags().DurationVar(&o.fresh, "fresh", 24*time.Hour, "leave certificates issued more recently than this alone (0 renews all)")
	allowZero(cmd, "fresh")
	cmd.Flags().DurationVar(&o.timeout, "node-timeout", 5*time.Minute, "how long each wait may take (a node's static Pods, rollouts, certificates)")
	cmd.Flags().IntVar(&o.maxUnavailable, "max-unavailable", 1, "how many workers' kubelets restart at once, each batch's Nodes and Pods Ready again before the next (control-plane nodes always one at a time)")
	cmd.Flags().BoolVar(&o.ca, "ca", false, "replace the CAs and the service-account key, in resumable stages (see above)")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be renewed and, per host, what would change and restart; change nothing")
	return cmd
}

func runRotate(cmd *cobra.Command, g *globalOptions, o *rotateOptions) error {
	if o.maxUnavailable < 1 {
		return usageError("--max-unavailable must be at least 1")
	}
	if o.ca {
		for _, f := range []string{"only", "new-keys", "fresh"} {
			if cmd.Flags().Changed(f) {
				return usageError("--%s does not apply to --ca: a CA rotation issues every certificate anew", f)
			}
		}
		if o.dryRun {
			return dryRotateCA(g)
		}
		return runRotateCA(cmd, g, o)
	}
	view := g.progressView()
	env, err := openCluster(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer env.Close()
	if o.dryRun {
		return dryRotate(cmd, g, o, env, view)
	}
	return change[playbooks.RotateResult]{g: g, view: view, result: "rotate_result", lock: mutating(cmd, g, env, false),
		ask: &question{what: "certs rotate restarts etcd and the control plane on each control-plane node in turn",
			ask: fmt.Sprintf("renew the certificates of cluster %q and restart its control plane node by node? [y/N] ", env.Inv.Cluster.Name), skip: o.yes},
		play: func(ctx context.Context) (*playbooks.RotateResult, error) {
			return playbooks.RotateCerts(ctx, env, playbooks.RotateOptions{Fresh: o.fresh, NewKeys: o.newKeys, Only: o.only, Timeout: o.timeout, MaxUnavailable: o.maxUnavailable})
		},
		report: func(w io.Writer, res *playbooks.RotateResult, _ time.Duration) {
			for _, r := range res.Renewed {
				fmt.Fprintf(w, "renewed %s\n", r)
			}
			for _, n := range res.Nodes {
				fmt.Fprintf(w, "%s: control plane back with the new certificates in %.1fs\n", n.Name, float64(n.DurationMS)/1000)
			}
			if len(res.Renewed) == 0 {
				fmt.Fprintln(w, "every certificate is fresh: nothing to do")
			}
		},
	}.run(cmd.Context())
}

func runRotateCA(cmd *cobra.Command, g *globalOptions, o *rotateOptions) error {
	view := g.progressView()
	env, err := openCluster(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer env.Close()
	return change[playbooks.CARotateResult]{g: g, view: view, result: "ca_rotate_result", lock: mutating(cmd, g, env, false),
		ask: &question{what: "certs rotate --ca replaces the cluster's CAs: control planes restart node by node, kubelets restart, workloads started before are rolled",
			ask: fmt.Sprintf("replace the CAs of cluster %q? [y/N] ", env.Inv.Cluster.Name), skip: o.yes},
		play: func(ctx context.Context) (*playbooks.CARotateResult, error) {
			return playbooks.RotateCA(ctx, env, playbooks.CARotateOptions{Timeout: o.timeout, MaxUnavailable: o.maxUnavailable})
		},
		notes: func(res *playbooks.CARotateResult, _ error) {
			if res != nil {
				for _, w := range res.Warnings {
					fmt.Fprintf(g.stderr, "warning: %s\n", w)
				}
			}
		},
		report: func(w io.Writer, res *playbooks.CARotateResult, took time.Duration) {
			if res.Resumed > 0 {
				fmt.Fprintf(w, "resumed the interrupted rotation at stage %d\n", res.Resumed)
			}
			for _, s := range res.Stages {
				fmt.Fprintf(w, "%s: %.1fs\n", s.Name, float64(s.DurationMS)/1000)
			}
			for _, r := range res.Restarted {
				fmt.Fprintf(w, "restarted %s\n", r)
			}
			fmt.Fprintf(w, "the cluster's CAs are replaced (%.0fs)\n", took.Seconds())
		},
	}.run(cmd.Context())
}

// dryRotate prints what certs rotate would renew, and per host what would change.
func dryRotate(cmd *cobra.Command, g *globalOptions, o *rotateOptions, env *playbooks.Env, view *eventView) error {
	return change[playbooks.RotateResult]{g: g, view: view, result: "rotate_plan",
		play: func(ctx context.Context) (*playbooks.RotateResult, error) {
			return playbooks.RotateCerts(ctx, env, playbooks.RotateOptions{Fresh: o.fresh, NewKeys: o.newKeys, Only: o.only, Timeout: o.timeout, DryRun: true})
		},
		report: func(w io.Writer, res *playbooks.RotateResult, _ time.Duration) {
			for _, r := range res.Renewed {
				fmt.Fprintf(w, "would renew %s\n", r)
			}
			total := printHostPlans(w, res.Plan)
			fmt.Fprintf(w, "dry run: %d renewal(s), %d change(s) on %d host(s); nothing was changed\n", len(res.Renewed), total, len(res.Plan))
		},
	}.run(cmd.Context())
}

// dryRotateCA prints the CA rotation's stages and where a run would start.
func dryRotateCA(g *globalOptions) error {
	_, state, _, err := loadWithState(g, stateCluster)
	if err != nil {
		return err
	}
	st := &pki.Store{Dir: filepath.Join(state, "pki")}
	rot, err := st.Rotation()
	if err != nil {
		return err
	}
	done := 0
	if rot != nil {
		done = pki.StagesDone(rot)
	}
	for stage := pki.StageGenerate; stage <= pki.StageFinish; stage++ {
		mark := "to do"
		if stage <= done {
			mark = "done"
		}
		fmt.Fprintf(g.stdout, "  %d %-8s %s\n", stage, pki.StageNames[stage], mark)
	}
	if done == 0 {
		fmt.Fprintln(g.stdout, "dry run: no CA rotation under way; --ca would run the five stages; nothing was changed")
	} else {
		fmt.Fprintf(g.stdout, "dry run: a CA rotation is under way (started %s); --ca resumes it at stage %d; nothing was changed\n", rot.Started.Format(time.RFC3339), done+1)
	}
	return nil
}

// hostError is a host a command could not read or change, in JSON: its status (unreachable, failed,
// interrupted) and why.
type hostError struct {
	Host   string `json:"host"`
	Status string `json:"status"`
	Error  string `json:"error"`
}
