package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/clusterctl/clusterctl/inventory"
)

type initOptions struct {
	hosts         []string
	controlPlanes int
	name          string
	user          string
	version       string
	from          string
	out           string
}

func newInitCmd(g *globalOptions) *cobra.Command {
	o := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented, valid inventory for the given hosts, or convert a kubespray inventory",
		Long: `Write a hosts.yaml to start from: the cluster section with its defaults spelled out and commented, and
one entry per --hosts value. The first --control-planes hosts are control-plane nodes (stacked etcd),
the others workers. A value is an address (IP or DNS name; the host is then named cp1.., w1..) or
NAME=ADDRESS. With --from, an Ansible/kubespray inventory (INI or YAML) is converted instead, as
clusterctl understands it (the same as inventory show -o yaml).

The result is validated before it is written; it goes to stdout, or to --out FILE (never over an
existing file). Nothing is contacted: run clusterctl preflight -i FILE next.`,
		Example: `  clusterctl init --hosts 10.0.0.11,10.0.0.21,10.0.0.22 > hosts.yaml
  clusterctl init --hosts 10.0.0.11,10.0.0.12,10.0.0.13,10.0.0.21 --control-planes 3 --user admin --out hosts.yaml
  clusterctl init --hosts cp1=cp1.example.com,w1=w1.example.com --name prod
  clusterctl init --from kubespray/inventory/prod/inventory.ini --out hosts.yaml`,
		Args: noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return runInit(g, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.hosts, "hosts", nil, "the hosts, comma-separated: ADDRESS or NAME=ADDRESS; the first --control-planes are the control plane")
	f.IntVar(&o.controlPlanes, "control-planes", 1, "how many of --hosts (the first ones) are control-plane nodes")
	f.StringVar(&o.name, "name", "kubernetes", "the cluster's name (kubeconfig contexts, the state directory)")
	f.StringVar(&o.user, "user", "root", "the SSH user on every host (become through sudo when not root)")
	f.StringVar(&o.version, "kubernetes-version", "", "the Kubernetes version (default "+inventory.DefaultKubernetesVersion+")")
	f.StringVar(&o.from, "from", "", "convert this Ansible/kubespray inventory (INI or YAML) instead of --hosts")
	f.StringVar(&o.out, "out", "", "the file to write (default: stdout); an existing file is refused")
	return cmd
}

func runInit(g *globalOptions, o *initOptions) error {
	var data []byte
	switch {
	case g.Output == "json" && o.out == "":
		return usageError("init writes the inventory itself to stdout; with -o json give --out FILE, and the JSON line says what was written")
	case o.from != "" && len(o.hosts) > 0:
		return usageError("init takes --hosts or --from, not both")
	case o.from != "":
		inv, diags, err := inventory.Load(o.from)
		if err != nil {
			return usageError("--from: %v", err)
		}
		printNotices(g.stderr, diags)
		if err := diags.Err(); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		if data, err = inv.MarshalNative(); err != nil {
			return err
		}
	case len(o.hosts) == 0:
		return usageError("init needs --hosts ADDRESS,... (or --from a kubespray inventory)")
	default:
		var err error
		if data, err = o.render(); err != nil {
			return err
		}
	}
	name := o.out
	if name == "" {
		name = "hosts.yaml"
	}
	if _, diags := inventory.Parse(name, data); diags.Err() != nil {
		return usageError("the inventory made is not valid (a value given is wrong):\n%v", diags.Err())
	}
	if wrote, err := writeOut(g, o.out, data, 0o644, "init never writes over a file"); !wrote || err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "wrote %s: check it with clusterctl preflight -i %s\n", o.out, o.out)
	if g.Output == "json" {
		return writeReport(g.stdout, "init_result", "ok", map[string]string{"file": o.out})
	}
	return nil
}

type initHost struct {
	Name, Address, Role string
}

// render fills the template; every value is checked first and written as a quoted YAML scalar.
func (o *initOptions) render() ([]byte, error) {
	if o.controlPlanes < 1 || o.controlPlanes > len(o.hosts) {
		return nil, usageError("--control-planes %d: give between 1 and the number of --hosts (%d)", o.controlPlanes, len(o.hosts))
	}
	if errs := validation.IsDNS1123Label(o.name); len(errs) > 0 {
		return nil, usageError("--name %q is not a cluster name: lowercase letters, digits and '-', starting and ending with a letter or digit (such as prod)", o.name)
	}
	if o.version != "" {
		if err := inventory.CheckKubernetesVersion(o.version); err != nil {
			return nil, usageError("--kubernetes-version %s: %v", o.version, err)
		}
	}
	var hosts []initHost
	seen := map[string]bool{}
	for i, v := range o.hosts {
		h := initHost{Role: "worker", Name: fmt.Sprintf("w%d", i-o.controlPlanes+1)}
		if i < o.controlPlanes {
			h.Role, h.Name = "control-plane", fmt.Sprintf("cp%d", i+1)
		}
		v = strings.TrimSpace(v) // "a, b" as a shell user writes it
		h.Address = v
		if name, addr, ok := strings.Cut(v, "="); ok {
			h.Name, h.Address = strings.TrimSpace(name), strings.TrimSpace(addr)
		}
		if errs := validation.IsDNS1123Subdomain(h.Name); len(errs) > 0 {
			return nil, usageError("--hosts %q: %q is not a host name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (such as cp2)", v, h.Name)
		}
		if net.ParseIP(h.Address) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(h.Address))) > 0 {
			return nil, usageError("--hosts %q: %q is neither an IP address nor a DNS name", v, h.Address)
		}
		if seen[h.Name] {
			return nil, usageError("--hosts: the name %s is given twice", h.Name)
		}
		seen[h.Name] = true
		hosts = append(hosts, h)
	}
	if o.version == "" {
		o.version = inventory.DefaultKubernetesVersion
	}
	var b strings.Builder
	err := initTemplate.Execute(&b, map[string]any{"Name": o.name, "Version": o.version, "User": o.user,
		"Hosts": hosts, "ControlPlanes": o.controlPlanes})
	return []byte(b.String()), err
}

var initTemplate = template.Must(template.New("hosts.yaml").Funcs(template.FuncMap{
	// q writes a string as a double-quoted YAML scalar (JSON's quoting is valid YAML).
	"q": func(s string) string { b, _ := json.Marshal(s); return string(b) },
}).Parse(`# clusterctl inventory written by clusterctl init. Every field is in inventory/examples/hosts.yaml.
# Check it:  clusterctl preflight -i THIS_FILE      Build it:  clusterctl up -i THIS_FILE
apiVersion: clusterctl/v1
kind: Inventory
cluster:
  name: {{q .Name}}
  # Kubernetes version, v1.34 to v1.37; raise it and run clusterctl upgrade to move the cluster.
  kubernetesVersion: {{q .Version}}
{{- if gt .ControlPlanes 1}}
  # With several control-plane hosts and no controlPlaneEndpoint, every node reaches the API servers
  # through a node-local proxy on 127.0.0.1:7443. A load balancer of yours: HOST:PORT here.
  # controlPlaneEndpoint: api.example.com:6443
{{- end}}
  networking:
    podSubnet: 10.244.0.0/16        # each node gets a /24 of it
    serviceSubnet: 10.96.0.0/12
  # Where containerd comes from: artifacts (clusterctl installs it) or host (the host's own).
  containerRuntime: artifacts
  # Pod network: bridge (nodes on one L2 network), flannel (VXLAN, nodes on routed subnets), manifests
  # (your CNI's YAML files), or none (a pod network installed as an add-on with network: true).
  cni:
    plugin: bridge
  # Labels, taints and kubelet settings of every node; groups: and a host's own add to them:
  # nodeLabels: {example.com/site: dc1}
  # kubelet:
  #   config: {maxPods: 200, systemReserved: {cpu: 500m, memory: 1Gi}}
  # Commands of yours around clusterctl's work on each host (up, add-node, remove-node, upgrade, reset):
  # hooks:
  #   up:
  #     before: ["mountpoint -q /var/lib/containerd || mount /var/lib/containerd"]

ssh:
  user: {{q .User}}
  # identityFiles: [~/.ssh/id_ed25519]   # default: the ssh-agent, then ~/.ssh/id_*
  # Host keys are checked against known_hosts; the first contact: clusterctl up --ssh-accept-new.

hosts:
{{- range .Hosts}}
  - name: {{q .Name}}
    address: {{q .Address}}
    roles: [{{.Role}}]
{{- end}}
`))
