package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
)

// TestGrowAndShrink starts from one control-plane node and one worker, adds a worker, grows the control plane
// to three stacked-etcd members, loses one control-plane host, removes nodes, and refuses a host that fails
// preflight without touching the cluster. Its hosts are on two subnets joined by a router (cp1, cp2 and cp3
// on one, w1 and w2 on the other: nodes reach each other only through a gateway, as in a VPC of several
// subnets): preflight refuses the bridge network there, naming the pair; the cluster runs flannel's VXLAN
// with the NetworkPolicy controller, and Pods on every pair of nodes reach each other over TCP and UDP,
// through a Service by its DNS name; a default-deny policy blocks a client of a Pod started before it, an
// allow rule lets exactly that client through, and removing the policies restores traffic. remove-node and
// reset leave no flannel device, directory or CNI configuration, and no nftables table of the controller.
func TestGrowAndShrink(t *testing.T) {
	// cp1 cp2 cp3 w1 w2: bare hosts; with three, the node-local proxy runs as a static Pod
	full := NewBareCluster(t, lab.Options{Hosts: 5, ControlPlanes: 3, Subnets: 2}, "  cni:\n    plugin: flannel\n    networkPolicy: true\n")
	// hooks of add-node and remove-node, each writing its point and host (first in the file: subsets keep them)
	hook := `'echo "$CLUSTERCTL_COMMAND.$CLUSTERCTL_HOOK $CLUSTERCTL_HOST" >>` + hookLog + `'`
	writeFile(t, full.Inventory, "hooks:\n  addNode: {before: ["+hook+"], after: ["+hook+"]}\n  removeNode: {before: ["+hook+"], after: ["+hook+"]}\n"+string(readFile(t, full.Inventory)))
	small := full.Subset(t, "small", "cp1", "w1")

	t.Run("the bridge network is refused on routed subnets, naming the pair and flannel", func(t *testing.T) {
		bridge := small.Subset(t, "small-bridge", "cp1", "w1")
		writeFile(t, bridge.Inventory, strings.Replace(string(readFile(t, bridge.Inventory)), "    plugin: flannel\n    networkPolicy: true\n", "    plugin: bridge\n", 1))
		_, stderr, code := bridge.Run(t, "up")
		if code == 0 || !strings.Contains(stderr, "not on one L2 segment") || !strings.Contains(stderr, "cp1") || !strings.Contains(stderr, "w1") ||
			!strings.Contains(stderr, "cni.plugin: flannel") {
			t.Fatalf("up with the bridge on two subnets: exit %d, want a preflight error naming cp1, w1 and flannel\n%s", code, tail(stderr, 30))
		}
	})
	small.Up(t)

	// w2 joins from a state directory pulled from the hosts (the cluster's: small's), as another
	// workstation's.
	pulled := *full
	t.Run("state pull into an empty directory: the same CA, an admin kubeconfig that works, nothing up would change", func(t *testing.T) {
		pulled.StateDir = CheckStatePull(t, small)
	})
	t.Run("add a worker from the pulled state; its token gets no other node's certificate; a workload schedules there", func(t *testing.T) {
		// w2's kubelet is held 25 s at its start: the window in which a host holding w2's token (as w2 does
		// from the push on) asks for client certificates of other nodes with it.
		full.Lab.Run(t, "w2", "mkdir -p /etc/systemd/system/kubelet.service.d && printf '[Service]\\nExecStartPre=/bin/sleep 25\\n' >/etc/systemd/system/kubelet.service.d/99-e2e-hold.conf")
		type result struct {
			stdout, stderr string
			code           int
		}
		// flannel's files on a node need nothing of another node: add-node leaves w1 (outside its run) alone,
		// its routes script not run (its stamps' digests, written on each run of it, as they were).
		const routesIn = "stat -c %y /var/lib/clusterctl/applied/routes.in"
		w1Routes := full.Lab.Run(t, "w1", routesIn)
		done := make(chan result, 1)
		go func() {
			stdout, stderr, code := full.Run(t, "add-node", "w2", "--state-dir", pulled.StateDir)
			done <- result{stdout, stderr, code}
		}()
		forged := ForgeJoinRequests(t, &pulled, "w2", 90*time.Second, "cp2", "cp1")
		r := <-done
		full.Lab.Run(t, "w2", "rm -f /etc/systemd/system/kubelet.service.d/99-e2e-hold.conf && systemctl daemon-reload")
		if r.code != 0 {
			t.Fatalf("add-node w2: exit %d\n%s", r.code, tail(r.stderr, 30))
		}
		if got := strings.TrimSpace(full.Lab.Run(t, "w2", "cat "+hookLog)); got != "add-node.before w2\nadd-node.after w2" {
			t.Errorf("w2's hooks: %q", got)
		}
		if got := full.Lab.Run(t, "cp1", "cat "+hookLog+" 2>/dev/null; true"); got != "" {
			t.Errorf("add-node w2 ran hooks on cp1: %q", got)
		}
		for node, name := range forged {
			if cond := full.MustK(t, "get", "csr", name, "-o", "jsonpath={.status.conditions[*].type}"); cond != "" {
				t.Errorf("the client CSR %s for %s made with w2's token has conditions %q, want none (pending)", name, node, cond)
			}
			if !strings.Contains(r.stdout+r.stderr, name) {
				t.Errorf("add-node did not name %s (for %s, made with w2's token) as left unapproved:\n%s", name, node, tail(r.stdout+r.stderr, 30))
			}
		}
		if out := full.MustK(t, "get", "secrets", "-n", "kube-system", "--field-selector", "type=bootstrap.kubernetes.io/token", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("bootstrap tokens left after add-node: %s", out)
		}
		if got := full.Lab.Run(t, "w1", routesIn); got != w1Routes {
			t.Errorf("add-node w2 ran w1's routes script (outside its run, nothing new for it): routes.in %q, then %q", w1Routes, got)
		}
		// The nodes keep their Service route (lab hosts have no default route): cp1's routes are rewritten
		// from its facts (it is in the run), and networkd puts back only what its drop-in has.
		for _, h := range []string{"cp1", "w1"} {
			if out := full.Lab.Run(t, h, "ip route show 10.96.0.0/12"); !strings.Contains(out, "dev ") {
				t.Errorf("%s lost its Service route when w2 joined: %q", h, out)
			}
		}
		full.LoadProbe(t, "w2")
		full.ProbePodOn(t, "on-w2", "w2")
	})

	// The probe Pods of the network's checks, on both subnets; Pods started before the policies.
	full.LoadProbe(t, "cp1", "w1")
	ips := ProbePods(t, full, "cp1", "w1", "w2")
	t.Run("Pods on every pair of nodes reach each other over TCP and UDP", func(t *testing.T) {
		CheckPodPairs(t, full, ips)
	})
	t.Run("a Service on w2 answers Pods on the other subnet, by its name", func(t *testing.T) {
		CheckServiceByName(t, full, "w2", "cp1", "w1")
	})
	t.Run("NetworkPolicy: default deny, an allow rule for one client, then none", func(t *testing.T) {
		CheckNetworkPolicy(t, full, "w2", ips["w2"], "cp1", "w1")
	})

	t.Run("a kubelet's serving certificate is the kubelet serving CA's, not the cluster CA's; logs, exec, port-forward work", func(t *testing.T) {
		CheckKubeletServing(t, full, "w2", "on-w2")
	})

	t.Run("hosts of the inventory not joined yet: etcd status and reboot say so and leave them out", func(t *testing.T) {
		members, code := full.EtcdStatus(t)
		var pending []string
		for _, m := range members {
			if m.NotJoined {
				pending = append(pending, m.Host)
			}
		}
		if code != 0 || strings.Join(pending, " ") != "cp2 cp3" {
			t.Errorf("etcd status: exit %d, not joined %v: %+v", code, pending, members)
		}
		_, stderr, code := full.Run(t, "reboot", "--dry-run")
		if code != 0 || !strings.Contains(stderr, "cp2, cp3 not part of the cluster yet: left out (clusterctl add-node -i "+full.Inventory+" cp2 cp3 joins them)") {
			t.Errorf("reboot --dry-run: exit %d\n%s", code, tail(stderr, 20))
		}
	})
	t.Run("grow the control plane to three", func(t *testing.T) {
		if _, stderr, code := full.Run(t, "add-node", "cp2", "cp3"); code != 0 {
			t.Fatalf("add-node cp2 cp3: exit %d\n%s", code, tail(stderr, 30))
		}
		members := full.Etcdctl(t, "cp1", "member list")
		if n := strings.Count(members, ", started, "); n != 3 || strings.Contains(members, "true") {
			t.Errorf("want 3 started voting members:\n%s", members)
		}
		for _, h := range full.Lab.Hosts[:3] {
			// Each API server by its own address, its certificate checked against it.
			out, err := full.K(t, "", "--server", "https://"+h.Address+":6443", "--tls-server-name", h.Address, "get", "--raw", "/readyz")
			if err != nil || out != "ok" {
				t.Errorf("the API server on %s: %q, %v", h.Name, out, err)
			}
		}
	})

	t.Run("every node reaches the API servers through its node-local proxy", func(t *testing.T) {
		for _, h := range []string{"cp1", "cp2", "cp3", "w1", "w2"} {
			// The proxy is a static Pod (haproxy from the artifacts' image), with every API server a backend.
			out := full.Lab.Run(t, h, "grep -h '^    server:' /etc/kubernetes/kubelet.conf; crictl ps --name clusterctl-apiserver-proxy --state running -q | grep -c .; grep -c '^    server cp' /etc/kubernetes/clusterctl-apiserver-proxy.cfg")
			if out != "    server: https://127.0.0.1:7443\n1\n3\n" {
				t.Errorf("%s: %q", h, out)
			}
		}
		// A kubelet restarted to use its proxy may post NotReady once while it starts ("container runtime
		// status check may not have completed yet"): Ready again within seconds.
		ready := full.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{end}")
		if ready != "TrueTrueTrueTrueTrue" {
			t.Logf("nodes Ready right after add-node: %q; waiting up to 60 s", ready)
			if _, err := full.K(t, "", "wait", "--for=condition=Ready", "nodes", "--all", "--timeout=60s"); err != nil {
				t.Errorf("nodes not all Ready: %v", err)
			}
		}
	})

	t.Run("certs rotate on three control-plane nodes: no failed request through a node's proxy", func(t *testing.T) {
		args := []string{"certs", "rotate", "--yes", "--fresh", "0s"}
		if os.Getenv(LongEnv) == "" {
			// make test: the API servers' certificates, each API server restarted in turn (~70 s); make
			// test-long every leaf, with etcd, the controller-managers and schedulers restarted (~150 s).
			// TestUp rotates every leaf of one control-plane node.
			args = append(args, "--only", "apiserver")
		}
		stop := StartProxyClient(t, full, "w1")
		_, stderr, code := full.Run(t, args...)
		ok, failed := stop()
		if code != 0 {
			t.Fatalf("certs rotate: exit %d\n%s", code, tail(stderr, 30))
		}
		t.Logf("during the rotation: %d requests ok, %d failed", ok, len(failed))
		if len(failed) > 0 {
			t.Errorf("requests failed during the rolling rotation:\n%s", strings.Join(firstTen(failed), "\n"))
		}
	})

	t.Run("encryption rotate on three control-plane nodes: Secrets written and read back through a node's proxy throughout", func(t *testing.T) {
		if os.Getenv(LongEnv) == "" {
			// ~5 min (three stages, each restarting three API servers); make test rotates the key of one
			// control-plane node (TestUp).
			t.Skip("make test-long runs it (" + LongEnv + "=1)")
		}
		// Secrets stored before, for the rewrite stage to store again under the new key.
		var list strings.Builder
		for i := range 20 {
			fmt.Fprintf(&list, "---\napiVersion: v1\nkind: Secret\nmetadata: {name: e2e-before-%d, namespace: default}\nstringData: {v: before-%d}\n", i, i)
		}
		if _, err := full.K(t, list.String(), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		stop := StartSecretClient(t, full, "w1")
		stdout, stderr, code := full.Run(t, "encryption", "rotate", "--yes")
		ok, failed := stop()
		if code != 0 {
			t.Fatalf("encryption rotate: exit %d\n%s", code, tail(stderr, 30))
		}
		t.Logf("encryption rotate:\n%s\nduring it: %d Secrets written and read back, %d failed", stdout, ok, len(failed))
		if len(failed) > 0 {
			t.Errorf("Secret requests failed during the rotation:\n%s", strings.Join(firstTen(failed), "\n"))
		}
		for _, stage := range []string{"read:", "write:", "rewrite:", "retire:"} {
			if !strings.Contains(stdout, stage) {
				t.Errorf("the rotation did not report its %s stage", stage)
			}
		}
		if st, code := full.EncryptionStatus(t); code != 0 || len(st.Keys) != 1 || st.Stale != 0 {
			t.Errorf("encryption status after the rotation: exit %d, %+v", code, st)
		}
		if m := regexp.MustCompile(`(\d+) object\(s\) stored again`).FindStringSubmatch(stdout); m == nil || atoi(m[1]) < 20 {
			t.Errorf("the rewrite did not store again the 20 Secrets made before:\n%s", stdout)
		}
		if got := full.MustK(t, "get", "secret", "e2e-before-7", "-n", "default", "-o", "jsonpath={.data.v}"); got != "YmVmb3JlLTc=" {
			t.Errorf("e2e-before-7 reads %q after the rotation", got)
		}
	})

	t.Run("clusterctl reboot of the control-plane nodes one at a time and of w2: no request through w1's proxy, to its workload or with its token fails", func(t *testing.T) {
		if os.Getenv(LongEnv) == "" {
			t.Skip("make test-long runs it (" + LongEnv + "=1)")
		}
		RebootUnderClients(t, full, "w1", "cp1", "cp2", "cp3", "w2")
	})

	t.Run("clusterctl reboot with w2 powered off: it stops naming w2, then finishes once w2 is back", func(t *testing.T) {
		if os.Getenv(LongEnv) == "" {
			t.Skip("make test-long runs it (" + LongEnv + "=1)")
		}
		RebootPowerOff(t, full, "w2")
	})

	// From here on the cluster is three control-plane nodes and w1: w2 leaves, and the inventory without it
	// is the cluster's (remove-node does not edit the user's inventory).
	threeOne := full.Subset(t, "three-one", "cp1", "cp2", "cp3", "w1")
	t.Run("remove a worker", func(t *testing.T) {
		defer func() {
			if got := strings.TrimSpace(full.Lab.Run(t, "w2", "cat "+hookLog+"; rm -f "+hookLog)); got != "add-node.before w2\nadd-node.after w2\nremove-node.before w2\nremove-node.after w2" {
				t.Errorf("w2's hooks: %q", got)
			}
		}()
		if _, stderr, code := full.Run(t, "remove-node", "--yes", "w2"); code != 0 {
			t.Fatalf("remove-node w2: exit %d\n%s", code, tail(stderr, 30))
		}
		CheckNoNetworkLeft(t, full, "w2")
	})

	t.Run("CA rotation on three control-plane nodes: the workload and a token client see no failure", func(t *testing.T) {
		if os.Getenv(LongEnv) == "" {
			// ~13 min; make test rotates the CA of one control-plane node and two workers (TestOperateUp).
			t.Skip("make test-long runs it (" + LongEnv + "=1)")
		}
		threeOne.LoadProbe(t, "w1")
		StartClients(t, threeOne, "w1")
		oldCA := readFile(t, filepath.Join(threeOne.StateDir, "pki", "ca.crt"))
		stdout, stderr, code := threeOne.Run(t, "certs", "rotate", "--ca", "--yes", "--output", "json")
		if code != 0 {
			t.Fatalf("certs rotate --ca: exit %d\n%s", code, tail(stderr, 30))
		}
		t.Logf("%s", lastLine(stdout))
		time.Sleep(5 * time.Second)
		o := ClientOutcomes(t, threeOne, "w1")
		t.Logf("token client during the rotation: %d ok (%d retries), %d failed; outages %v", o.OK, o.Retried, len(o.Failed), o.Outages)
		if o.OK == 0 || len(o.Failed) > 0 {
			if len(o.Failed) > 10 {
				o.Failed = o.Failed[:10]
			}
			t.Errorf("the token client or the workload failed during the CA rotation:\n%s", strings.Join(o.Failed, "\n"))
		}
		CheckNewCA(t, threeOne, oldCA, "cp1", "cp2", "cp3", "w1")
		members := threeOne.Etcdctl(t, "cp1", "member list")
		if n := strings.Count(members, ", started, "); n != 3 {
			t.Errorf("want 3 started members after the rotation:\n%s", members)
		}
	})

	t.Run("one control-plane host dies; the cluster keeps answering", func(t *testing.T) {
		full.Lab.Kill(t, "cp3")
		killed := time.Now()
		// A write may time out while etcd elects a new leader (cp3 may have led); it must succeed within
		// seconds, as a client retrying would see.
		for attempt := 1; ; attempt++ {
			_, err := full.K(t, "", "create", "configmap", "after-cp3", "--from-literal=k=v")
			if err == nil {
				t.Logf("write accepted %s after cp3 died (attempt %d)", time.Since(killed).Round(100*time.Millisecond), attempt)
				break
			}
			if time.Since(killed) > 20*time.Second {
				t.Fatal(err)
			}
			t.Logf("attempt %d: %v", attempt, err)
			time.Sleep(time.Second)
		}
		// The workers' kubelets keep renewing their leases through their proxies.
		deadline := time.Now().Add(60 * time.Second)
		for {
			renew := full.MustK(t, "get", "lease", "-n", "kube-node-lease", "w1", "-o", "jsonpath={.spec.renewTime}")
			if at, err := time.Parse(time.RFC3339Nano, renew); err == nil && at.After(killed.Add(time.Second)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("w1 has not renewed its lease since cp3 died (last %s)", renew)
			}
			time.Sleep(2 * time.Second)
		}
	})

	t.Run("remove the dead control-plane node and a control-plane node", func(t *testing.T) {
		for _, names := range [][]string{{"cp3"}, {"cp2"}} {
			if _, stderr, code := full.Run(t, append([]string{"remove-node", "--yes"}, names...)...); code != 0 {
				t.Fatalf("remove-node %v: exit %d\n%s", names, code, tail(stderr, 30))
			}
		}
		nodes := full.MustK(t, "get", "nodes", "-o", "name")
		if strings.TrimSpace(nodes) != "node/cp1\nnode/w1" {
			t.Errorf("nodes left: %q", nodes)
		}
		if members := full.Etcdctl(t, "cp1", "member list"); strings.Count(members, "started") != 1 {
			t.Errorf("etcd members left:\n%s", members)
		}
		for _, h := range []string{"w2", "cp2"} {
			if out, _ := full.Lab.SSH("", h, "ls -d /etc/kubernetes /var/lib/kubelet 2>/dev/null; pgrep -x kubelet; true"); strings.TrimSpace(out) != "" {
				t.Errorf("%s not reset: %s", h, out)
			}
		}
		CheckNoNetworkLeft(t, full, "cp2")
	})

	t.Run("a host that fails preflight is refused and the cluster is untouched", func(t *testing.T) {
		// Something else holds the kubelet's port on w2 (systemd's own tool: the host is bare, no socat).
		full.Lab.Run(t, "w2", "systemd-run --unit squat systemd-socket-activate -l 10250 cat")
		before := full.MustK(t, "get", "nodes,secrets", "-A", "-o", "name")
		_, stderr, code := full.Run(t, "add-node", "w2")
		if code != 1 || !strings.Contains(stderr, "Port-10250") {
			t.Errorf("add-node of a host with port 10250 taken: exit %d, want 1 naming Port-10250\n%s", code, tail(stderr, 20))
		}
		if after := full.MustK(t, "get", "nodes,secrets", "-A", "-o", "name"); after != before {
			t.Errorf("the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if out, _ := full.Lab.SSH("", "w2", "ls -d /etc/kubernetes 2>/dev/null; true"); strings.TrimSpace(out) != "" {
			t.Errorf("files were pushed to w2: %s", out)
		}
	})

	t.Run("reset leaves no flannel device, directory or CNI configuration", func(t *testing.T) {
		left := full.Subset(t, "left", "cp1", "w1")
		if _, stderr, code := left.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, tail(stderr, 30))
		}
		CheckNoNetworkLeft(t, left, "cp1", "w1")
	})
}
