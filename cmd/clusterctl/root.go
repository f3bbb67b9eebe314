package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/flannel"
	"github.com/clusterctl/clusterctl/tasks/images"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	Inventory string
	StateDir  string
	Output    string
	Verbose   int
	Forks     int
	Limit     []string
	// ForceUnlock is --force-unlock, of the commands that take the lock.
	ForceUnlock bool

	stdout, stderr io.Writer
	log            *slog.Logger
}

const defaultForks = 100

// Annotation listing the --output values a command accepts, when not text and json.
const outputsAnnotation = "clusterctl/outputs"

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	opts := &globalOptions{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "clusterctl",
		Short: "Build and operate Kubernetes clusters over SSH, the way kubeadm does, from one workstation",
		Long: `clusterctl reads an inventory of hosts, generates the cluster's PKI, kubeconfigs and static Pod
manifests locally, pushes them over SSH, and sequences the control-plane and worker phases.
Nothing of clusterctl's is installed on the hosts.

Inventories are either clusterctl's own hosts.yaml or an unchanged Ansible/kubespray
inventory (YAML or INI).

Exit codes: 0 success, 1 the operation failed on some host, 2 bad usage or bad inventory,
130 interrupted.`,
		Example: `  clusterctl inventory validate -i hosts.yaml
  clusterctl inventory show -i inventory/mycluster/hosts.ini --output json`,
		Version:       fmt.Sprintf("%s (commit %s)", version, commit),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return opts.complete(cmd)
		},
	}
	root.SetVersionTemplate("clusterctl {{.Version}}\n") // as the first line of clusterctl version
	root.SetOut(stdout)
	root.SetErr(stderr)
	// A bad flag is a usage error; run names the command and its --help, as for cobra's other usage errors.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })

	f := root.PersistentFlags()
	f.StringVarP(&opts.Inventory, "inventory", "i", "", "inventory file: clusterctl hosts.yaml, or an Ansible/kubespray YAML or INI inventory")
	f.StringVar(&opts.StateDir, "state-dir", "", "directory for the cluster's PKI, tokens and progress (default: .clusterctl/<cluster name> beside the inventory)")
	f.StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	f.CountVarP(&opts.Verbose, "verbose", "v", "log more: -v informational, -vv debug (each remote command and upload with its host and time)")
	f.IntVar(&opts.Forks, "forks", defaultForks, "how many hosts to work on at once")
	f.StringSliceVar(&opts.Limit, "limit", nil, "act only on these hosts (comma-separated names from the inventory)")

	root.AddCommand(newVersionCmd(opts), newInitCmd(opts), newInventoryCmd(opts), newKubeconfigCmd(opts), newPreflightCmd(opts), newExecCmd(opts), newRenderCmd(opts), newCertsCmd(opts), newUpCmd(opts), newResetCmd(opts), newAddNodeCmd(opts), newRemoveNodeCmd(opts), newUpgradeCmd(opts), newRebootCmd(opts), newEtcdCmd(opts), newEncryptionCmd(opts), newArtifactsCmd(opts), newAddonsCmd(opts), newStatusCmd(opts), newDiffCmd(opts), newStateCmd(opts), newBackupCmd(opts), newKeeperCmd())
	registerCompletions(root, opts)
	root.InitDefaultCompletionCmd()
	guardGroups(root)
	completionExamples := map[string]string{
		"bash":       "source <(clusterctl completion bash)",
		"zsh":        `clusterctl completion zsh > "${fpath[1]}/_clusterctl"`,
		"fish":       "clusterctl completion fish > ~/.config/fish/completions/clusterctl.fish",
		"powershell": "clusterctl completion powershell | Out-String | Invoke-Expression",
	}
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Example = "  " + strings.Join([]string{completionExamples["bash"], completionExamples["zsh"], completionExamples["fish"], completionExamples["powershell"]}, "\n  ")
		for _, sub := range c.Commands() {
			sub.Example = "  " + completionExamples[sub.Name()]
		}
	}
	return root
}

// complete validates the global flags and sets up logging.
func (o *globalOptions) complete(cmd *cobra.Command) error {
	outputs := []string{"text", "json"}
	if extra, ok := cmd.Annotations[outputsAnnotation]; ok {
		outputs = strings.Split(extra, ",")
	}
	if !slices.Contains(outputs, o.Output) {
		return usageError("--output %q is not one of %s for %s", o.Output, strings.Join(outputs, ", "), cmd.CommandPath())
	}
	if err := checkValues(cmd); err != nil {
		return err
	}
	for i := range o.Limit {
		o.Limit[i] = strings.TrimSpace(o.Limit[i]) // "w1, w2" as a shell user writes it
	}
	level := slog.LevelWarn
	switch {
	case o.Verbose >= 2:
		level = slog.LevelDebug
	case o.Verbose == 1:
		level = slog.LevelInfo
	}
	o.log = slog.New(newLineHandler(o.stderr, level))
	return nil
}

// loadInventory reads the inventory named by -i. Warnings and notices go to stderr; an invalid inventory is
// an error with exit code 2 that lists every problem.
func (o *globalOptions) loadInventory() (*inventory.Inventory, inventory.Diagnostics, error) {
	if o.Inventory == "" {
		return nil, nil, usageError("no inventory: give one with -i FILE")
	}
	inv, diags, err := inventory.Load(o.Inventory)
	if err != nil {
		return nil, nil, &exitError{code: exitUsage, err: err}
	}
	return inv, diags, nil
}

func newVersionCmd(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of clusterctl, the Kubernetes versions it supports and the components it pins",
		Example: "  clusterctl version\n  clusterctl version --output json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := versionInfo()
			if err != nil {
				return err
			}
			if opts.Output == "json" {
				return writeReport(opts.stdout, "version", "ok", info)
			}
			c := info.Components
			_, err = fmt.Fprintf(opts.stdout, "clusterctl %s (commit %s)\nKubernetes %s to %s, default %s; with %s it installs etcd %s, CoreDNS %s, pause %s, containerd %s, runc %s, CNI plugins %s, crictl %s, flannel %s, haproxy %s (the node-local API proxy)\n",
				info.Version, info.Commit, info.Kubernetes.Oldest, info.Kubernetes.Newest, info.Kubernetes.Default, info.Kubernetes.Default,
				c.Etcd, c.CoreDNS, c.Pause, c.Containerd, c.Runc, c.CNIPlugins, c.Crictl, info.Flannel, info.HAProxy)
			return err
		},
	}
}

// versionJSON is what version -o json prints, one line.
type versionJSON struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	Kubernetes struct {
		Oldest  string `json:"oldest"`
		Newest  string `json:"newest"`
		Default string `json:"default"`
	} `json:"kubernetes"`
	// Components are the versions installed with the default Kubernetes version.
	Components pull.Versions `json:"components"`
	Flannel    string        `json:"flannel"`
	HAProxy    string        `json:"haproxy"`
}

func versionInfo() (versionJSON, error) {
	v := versionJSON{Version: version, Commit: commit, Flannel: flannel.Version, HAProxy: images.TagOf(images.ProxyImage)}
	oldest, newest := inventory.SupportedMinors()
	v.Kubernetes.Oldest, v.Kubernetes.Newest, v.Kubernetes.Default = fmt.Sprintf("v1.%d", oldest), fmt.Sprintf("v1.%d", newest), inventory.DefaultKubernetesVersion
	var err error
	v.Components, err = pull.VersionsFor(inventory.DefaultKubernetesVersion)
	return v, err
}

// registerCompletions completes host names from the inventory given with -i (add-node, remove-node, --limit)
// and the --output values each command takes.
func registerCompletions(root *cobra.Command, opts *globalOptions) {
	// hosts are the inventory's host names not in taken that start with toComplete (none without -i).
	hosts := func(taken []string, toComplete string) []string {
		if opts.Inventory == "" {
			return nil
		}
		inv, _, err := inventory.Load(opts.Inventory)
		if err != nil {
			return nil
		}
		var out []string
		for _, h := range inv.Hosts {
			if !slices.Contains(taken, h.Name) && strings.HasPrefix(h.Name, toComplete) {
				out = append(out, h.Name)
			}
		}
		return out
	}
	for _, c := range root.Commands() {
		if c.Name() == "add-node" || c.Name() == "remove-node" {
			c.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return hosts(args, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
	}
	_ = root.RegisterFlagCompletionFunc("limit", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		// --limit a,b,<TAB>: complete the last name, keeping those before.
		done, last := "", toComplete
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			done, last = toComplete[:i+1], toComplete[i+1:]
		}
		names := hosts(strings.Split(done, ","), last)
		for i := range names {
			names[i] = done + names[i]
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("output", func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if extra, ok := cmd.Annotations[outputsAnnotation]; ok {
			return strings.Split(extra, ","), cobra.ShellCompDirectiveNoFileComp
		}
		return []string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp
	})
}
