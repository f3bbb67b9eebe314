package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RebootUnderClients runs `clusterctl reboot` of hosts (each control-plane node one at a time, then the
// workers one at a time) while, on client (a worker left out of the reboot), a workload behind a Service,
// a client of the API with its service-account token, and a client of the control-plane endpoint through
// the node's node-local proxy run: none of their requests may fail. Every host rebooted is in a new boot,
// every Node Ready and schedulable after.
func RebootUnderClients(t *testing.T, c *Cluster, client string, hosts ...string) {
	t.Helper()
	c.LoadProbe(t, client)
	StartClients(t, c, client)
	stop := StartProxyClient(t, c, client)
	before := c.Lab.BootIDs(t, hosts...)
	stdout, stderr, code := c.Run(t, "reboot", "--yes", "--limit", strings.Join(hosts, ","), "--output", "json")
	ok, failed := stop()
	if code != 0 {
		t.Fatalf("reboot: exit %d\n%s", code, tail(stderr, 40))
	}
	var res struct {
		Type     string
		Rebooted []struct {
			Name           string
			SSHMS, ReadyMS int64
		}
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || res.Type != "reboot_result" {
		t.Fatalf("reboot's result line: %v\n%s", err, tail(stdout, 5))
	}
	for _, r := range res.Rebooted {
		t.Logf("%s: SSH in a new boot after %.1f s, Ready after %.1f s", r.Name, float64(r.SSHMS)/1000, float64(r.ReadyMS)/1000)
	}
	if len(res.Rebooted) != len(hosts) {
		t.Errorf("rebooted %d hosts, want %d: %+v", len(res.Rebooted), len(hosts), res.Rebooted)
	}
	after := c.Lab.BootIDs(t, hosts...)
	for _, h := range hosts {
		if after[h] == before[h] {
			t.Errorf("%s is in the boot it was in before", h)
		}
	}
	t.Logf("through %s's node-local proxy during the reboot: %d requests ok, %d failed", client, ok, len(failed))
	if len(failed) > 0 {
		t.Errorf("requests through the node-local proxy failed:\n%s", strings.Join(firstTen(failed), "\n"))
	}
	time.Sleep(2 * time.Second)
	o := ClientOutcomes(t, c, client)
	t.Logf("token client and workload during the reboot: %d ok (%d retries), %d failed; outages %v", o.OK, o.Retried, len(o.Failed), o.Outages)
	if o.OK == 0 || len(o.Failed) > 0 {
		t.Errorf("the token client or the workload failed during the reboot:\n%s", strings.Join(firstTen(o.Failed), "\n"))
	}
	checkNodesSchedulable(t, c)
}

// checkNodesSchedulable checks that every Node is Ready and none is cordoned.
func checkNodesSchedulable(t *testing.T, c *Cluster) {
	t.Helper()
	out := c.MustK(t, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.spec.unschedulable}{"\n"}{end}`)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) != 2 || f[1] != "True" {
			t.Errorf("node not Ready, or cordoned: %q", l)
		}
	}
}

// RebootPowerOff powers host off while `clusterctl reboot` reboots it: the command stops within its
// --node-timeout naming the host, which stays cordoned while every other Node is left as it was; once the
// host is switched on, the same command finishes.
func RebootPowerOff(t *testing.T, c *Cluster, host string) {
	t.Helper()
	before := c.Lab.BootIDs(t, host)
	cmd := exec.Command(c.Bin, "reboot", "--yes", "--limit", host, "--node-timeout", "45s", "-i", c.Inventory)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Off as soon as it is going down (SSH no longer answers with the old boot).
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out, err := exec.Command("ssh", "-F", c.Lab.SSHConfig(), "-o", "ConnectTimeout=2", host, "cat /proc/sys/kernel/random/boot_id").Output()
		if err != nil || strings.TrimSpace(string(out)) != before[host] {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("%s never went down", host)
		}
	}
	c.Lab.Kill(t, host)
	err := cmd.Wait()
	took := time.Since(start)
	msg := stderr.String()
	t.Logf("reboot with %s powered off: %v after %s", host, err, took.Round(100*time.Millisecond))
	if err == nil || !strings.Contains(msg, host) || !strings.Contains(msg, "--node-timeout") {
		t.Errorf("reboot with %s off: %v, want a failure naming it and --node-timeout:\n%s", host, err, tail(msg, 20))
	}
	if took > 3*time.Minute {
		t.Errorf("the command took %s to give up on %s (--node-timeout 45s)", took.Round(time.Second), host)
	}
	out := c.MustK(t, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{"\n"}{end}`)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if cordoned := len(f) == 2 && f[1] == "true"; cordoned != (f[0] == host) {
			t.Errorf("after the failed reboot, %q: want %s alone cordoned", l, host)
		}
	}
	c.Lab.Start(t, nil, host)
	stdout, stderrOut, code := c.Run(t, "reboot", "--yes", "--limit", host)
	if code != 0 {
		t.Fatalf("the re-run once %s is back: exit %d\n%s", host, code, tail(stderrOut, 30))
	}
	if out := stdout + stderrOut; !strings.Contains(out, "(resumed)") || !strings.Contains(out, "rebooted by the run that was interrupted") {
		t.Errorf("the re-run did not resume, or rebooted %s again rather than waiting for it:\n%s", host, tail(out, 20))
	}
	checkNodesSchedulable(t, c)
}

// RebootIfNeeded patches and reboots, in one command, only the host that asks for it: host gets
// /run/reboot-required (what Debian's unattended-upgrades writes), the inventory a hooks.reboot (the
// patch, before, and a check after), and `clusterctl reboot --if-needed` reboots host alone, its hooks
// inside its drain window, the others left in the boot they were in. Before, with others[0]'s Node not
// Ready, the same command is refused and changes nothing.
func RebootIfNeeded(t *testing.T, c *Cluster, host string, others ...string) {
	t.Helper()
	const log = "/var/tmp/clusterctl-e2e-patch.log"
	hook := `'echo "$CLUSTERCTL_COMMAND.$CLUSTERCTL_HOOK $CLUSTERCTL_HOST $(cat /proc/sys/kernel/random/boot_id)" >>` + log + `'`
	inv := readFile(t, c.Inventory)
	writeFile(t, c.Inventory, "hooks:\n  reboot: {before: ["+hook+"], after: ["+hook+"]}\n"+string(inv))
	defer writeFile(t, c.Inventory, string(inv))
	c.Lab.Run(t, host, "touch /run/reboot-required; rm -f "+log)
	// Refused while a Node is not Ready: others[0]'s kubelet stopped, its Ready condition set False (as the
	// node lifecycle controller would, later); nothing is cordoned or rebooted.
	down := others[0]
	c.Lab.Run(t, down, "systemctl stop kubelet")
	c.MustK(t, "patch", "node", down, "--subresource=status", "-p", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"E2EStopped","message":"kubelet stopped by the test"}]}}`)
	ids := c.Lab.BootIDs(t, host)
	_, stderr, code := c.Run(t, "reboot", "--if-needed", "--yes")
	if code == 0 || !strings.Contains(stderr, "reboot refused") || !strings.Contains(stderr, "Nodes not Ready: "+down) {
		t.Errorf("reboot with %s not Ready: exit %d, want it refused naming %s:\n%s", down, code, down, tail(stderr, 20))
	}
	if c.Lab.BootIDs(t, host)[host] != ids[host] {
		t.Errorf("%s rebooted by a refused run", host)
	}
	c.Lab.Run(t, down, "systemctl start kubelet")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if out := c.MustK(t, "get", "node", down, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.unschedulable}`); out == "True " {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%s after its kubelet started again: %q", down, out)
		}
	}
	before := c.Lab.BootIDs(t, append([]string{host}, others...)...)
	stdout, stderr, code := c.Run(t, "reboot", "--if-needed", "--yes", "--output", "json")
	if code != 0 {
		t.Fatalf("reboot --if-needed: exit %d\n%s", code, tail(stderr, 30))
	}
	var res struct {
		Type      string
		Rebooted  []struct{ Name, Needs string }
		NotNeeded []string
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || res.Type != "reboot_result" {
		t.Fatalf("reboot's result line: %v\n%s", err, tail(stdout, 5))
	}
	if len(res.Rebooted) != 1 || res.Rebooted[0].Name != host || res.Rebooted[0].Needs != "reboot-required" || len(res.NotNeeded) != len(others) {
		t.Errorf("rebooted %+v, not needed %v: want %s alone (reboot-required), the others not needed", res.Rebooted, res.NotNeeded, host)
	}
	after := c.Lab.BootIDs(t, append([]string{host}, others...)...)
	if after[host] == before[host] {
		t.Errorf("%s is in the boot it was in before", host)
	}
	for _, h := range others {
		if after[h] != before[h] {
			t.Errorf("%s rebooted, though it did not ask for it", h)
		}
	}
	want := "reboot.before " + host + " " + before[host] + "\nreboot.after " + host + " " + after[host] + "\n"
	if got := c.Lab.Run(t, host, "cat "+log+"; test -e /run/reboot-required && echo STILL-REQUIRED || true"); got != want {
		t.Errorf("%s's hooks and /run/reboot-required after the reboot:\n%s\nwant:\n%s", host, got, want)
	}
	checkNodesSchedulable(t, c)
}
