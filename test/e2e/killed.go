package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// UpKilled starts `clusterctl up --output json` and kills it with SIGKILL delay after the phase starts. It
// fails the test if up ends before that.
func (c *Cluster) UpKilled(t testing.TB, phase string, delay time.Duration) {
	t.Helper()
	c.RunKilled(t, phase, delay, "up")
}

// RunKilled runs a clusterctl command (the inventory added) and kills it (SIGKILL) delay after the JSON output
// announces phase.
func (c *Cluster) RunKilled(t testing.TB, phase string, delay time.Duration, args ...string) {
	t.Helper()
	c.RunFault(t, phase, delay, func(cmd *exec.Cmd) {
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("clusterctl %s killed (SIGKILL) %s into phase %s", strings.Join(args, " "), delay, phase)
	}, args...)
}

// RunFault runs a clusterctl command with --output json (the inventory added), calls fault delay after the
// output announces phase, and returns the output (JSON lines), stderr and the exit code. The test fails if
// the command ends before phase.
func (c *Cluster) RunFault(t testing.TB, phase string, delay time.Duration, fault func(*exec.Cmd), args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(c.Bin, append(args, "--output", "json", "-i", c.Inventory)...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	injected := false
	for sc.Scan() {
		stdout.Write(sc.Bytes())
		stdout.WriteByte('\n')
		var e struct{ Type, Play string }
		if !injected && json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "phase_start" && e.Play == phase {
			time.Sleep(delay)
			fault(cmd)
			injected = true
		}
	}
	err = cmd.Wait()
	if !injected {
		t.Fatalf("clusterctl %s ended before phase %s started:\n%s", args[0], phase, tail(stderr.String(), 20))
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}
