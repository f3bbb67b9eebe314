package hooks

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/transport"
)

// local runs command lines with this machine's sh, as the host's login shell would.
type local struct{ name string }

func (l local) Name() string { return l.name }

func (l local) Run(ctx context.Context, command string, _ []byte) (transport.Result, error) {
	var out, errb bytes.Buffer
	c := exec.CommandContext(ctx, "sh", "-c", command)
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	res := transport.Result{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return res, &transport.CommandError{Host: l.name, Command: command, ExitCode: ee.ExitCode(), Stderr: errb.String()}
	}
	return res, err
}

func TestRunEnvironmentAndQuoting(t *testing.T) {
	// The command is the author's (its quotes and $ are the shell's); the environment is clusterctl's.
	hooks := []inventory.Hook{{Run: `printf '%s|%s|%s|%s\n' "$CLUSTERCTL_HOST" "$CLUSTERCTL_COMMAND" "$CLUSTERCTL_HOOK" 'it''s'`}}
	res, err := Run(context.Background(), local{"w1"}, Point{inventory.HookUpgrade, "before"}, hooks)
	if err != nil || len(res) != 1 || res[0].Output != "w1|upgrade|before|its\n" {
		t.Fatalf("%+v %v", res, err)
	}
	// A value with shell syntax in it reaches the hook as data.
	res, err = Run(context.Background(), local{"a'b;$(touch x)"}, Point{"up", "after"}, []inventory.Hook{{Run: `printf %s "$CLUSTERCTL_HOST"`}})
	if err != nil || res[0].Output != "a'b;$(touch x)" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestRunFailurePolicy(t *testing.T) {
	hooks := []inventory.Hook{
		{Run: "echo soft >&2; exit 3", OnFailure: inventory.HookContinue},
		{Run: "echo ran"},
		{Run: "echo hard failure >&2; exit 4"},
		{Run: "echo never"},
	}
	res, err := Run(context.Background(), local{"cp1"}, Point{"reset", "before"}, hooks)
	if err == nil || len(res) != 3 {
		t.Fatalf("%d results, %v; want 3 and the third's error", len(res), err)
	}
	for _, want := range []string{"cp1: hook reset.before", `"echo hard failure >&2; exit 4"`, "exit status 4: hard failure"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "exit status 3: soft") || res[1].Err != nil || res[1].Output != "ran\n" {
		t.Errorf("continue hook: %+v; next: %+v", res[0], res[1])
	}
}
