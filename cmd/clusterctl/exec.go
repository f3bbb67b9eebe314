package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/transport"
)

type execOptions struct {
	ssh sshOptions
}

func newExecCmd(g *globalOptions) *cobra.Command {
	o := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec -- COMMAND",
		Short: "Run a shell command on every host (or those of --limit), as root",
		Long: `Run a shell command on every host of the inventory, --forks at once, as root (through sudo when the
login user is not root), the way "ansible all -m shell -a" does. Each host's output is printed under its
name, in inventory order; with --output json, one JSON object per host. Exit code 1 if the command
failed or the host was unreachable anywhere.`,
		Example: `  clusterctl exec -i hosts.yaml -- uptime
  clusterctl exec -i hosts.yaml --limit w1,w2 -- 'systemctl is-active kubelet'
  clusterctl exec -i hosts.yaml -o json -- cat /etc/os-release`,
		Args: atLeastOne("the command to run on the hosts", "clusterctl exec -i hosts.yaml -- uptime"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd.Context(), g, o, strings.Join(args, " "))
		},
	}
	o.ssh.addFlags(cmd)
	return cmd
}

type execResult struct {
	Type     string           `json:"type"` // exec
	Host     string           `json:"host"`
	Status   transport.Status `json:"status"`
	ExitCode int              `json:"exitCode"`
	Stdout   string           `json:"stdout"`
	Stderr   string           `json:"stderr"`
	Error    string           `json:"error,omitempty"`
}

func runExec(ctx context.Context, g *globalOptions, o *execOptions, command string) error {
	env, done, err := openReading(g, &o.ssh, nil)
	if err != nil {
		return err
	}
	defer done()
	var mu sync.Mutex
	out := map[string]*execResult{}
	names := make([]string, 0, len(env.Hosts))
	for _, h := range env.Hosts {
		names = append(names, h.Name)
	}
	byName := map[string]int{}
	for i, h := range env.Hosts {
		byName[h.Name] = i
	}
	results, err := transport.Fanout(ctx, "exec", names, transport.Policy{Limit: env.Forks, MaxFail: 1}, nil,
		func(ctx context.Context, name string) (bool, error) {
			c := env.Conn(name)
			if c == nil {
				if _, err := playbooks.Connect(ctx, env, env.Hosts[byName[name]:byName[name]+1], 0); err != nil {
					return false, err
				}
				c = env.Conn(name)
			}
			res, err := c.Run(ctx, command, nil)
			env.Disconnect(name)
			mu.Lock()
			out[name] = &execResult{Host: name, ExitCode: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr)}
			mu.Unlock()
			return false, err
		})
	if err != nil && ctx.Err() != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		e := out[r.Host]
		if e == nil {
			e = &execResult{Host: r.Host, ExitCode: -1}
		}
		e.Type, e.Status = "exec", r.Status
		if r.Err != nil {
			e.Error = r.Err.Error()
			failed++
		}
		if g.Output == "json" {
			if err := writeJSONLine(g.stdout, e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprint(g.stdout, execText(e))
	}
	if g.Output == "json" {
		if err := writeReport(g.stdout, "exec_result", statusOf(failed == 0), map[string]int{"hosts": len(results), "failed": failed}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("the command failed on %d of %d host(s)", failed, len(results))}
	}
	return nil
}

// execText is a host's result as text: a header line, then what the command printed, with the control
// characters a terminal would act on escaped (a host's output is data, not terminal commands).
func execText(e *execResult) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s | %s", e.Host, strings.ToUpper(string(e.Status)))
	if e.ExitCode > 0 {
		fmt.Fprintf(&b, " | rc=%d", e.ExitCode)
	}
	b.WriteString("\n")
	b.WriteString(e.Stdout)
	if e.Stdout != "" && !strings.HasSuffix(e.Stdout, "\n") {
		b.WriteString("\n")
	}
	if e.Stderr != "" {
		b.WriteString(e.Stderr)
		if !strings.HasSuffix(e.Stderr, "\n") {
			b.WriteString("\n")
		}
	} else if e.Error != "" && e.ExitCode <= 0 {
		b.WriteString(e.Error + "\n")
	}
	return escapeText(b.String())
}
