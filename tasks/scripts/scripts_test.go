package scripts

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Every script, for representative values (an IPv6 address, dotted host names, a registry with a port,
// a value with quotes and a command substitution in it), is compared with its golden file and checked by
// sh -n: what runs on hosts is reviewed here, exactly.
// testNetwork is what playbooks' reset passes: every pod network's leftovers (networkLeftovers).
var testNetwork = NetworkLeftovers{
	Files: []string{"/etc/cni/net.d/10-clusterctl-bridge.conflist", "/etc/cni/net.d/10-clusterctl-flannel.conflist",
		"/etc/systemd/system/clusterctl-pod-routes.service", "/var/lib/clusterctl/pod-routes"},
	Dirs: []string{"/run/flannel"}, Links: []string{"cni0", "flannel.1"}, Networks: []string{"clusterctl-bridge", "clusterctl-flannel"},
	Chains: []string{"FLANNEL-"}, Networkd: "/etc/systemd/networkd.conf.d/clusterctl.conf",
}

// routesUnit is the pod routes unit (tasks/bridge), a pod network's unit.
const routesUnit = "/etc/systemd/system/clusterctl-pod-routes.service"

func TestGolden(t *testing.T) {
	restoreCheck := RestoreCheckParams{Etcdutl: kubeadm.Binary("etcdutl"), Manifest: kubeadm.Manifest(kubeadm.Etcd), Held: EtcdHold + "/" + kubeadm.Etcd + ".yaml"}
	hostile := "registry.example.com:5000/k8s/pause:3.10'$(id)'"
	cases := map[string]string{
		"setup": Setup(SetupParams{Changed: []string{kubeadm.ContainerdConfig, kubeadm.ImagesDir + "/pause.tar"}, Images: []Image{{File: kubeadm.ImagesDir + "/pause.tar", Ref: hostile}}, NetworkUnits: []string{routesUnit},
			PodRoutes: "/var/lib/clusterctl/pod-routes", PodRoutesUnit: "clusterctl-pod-routes.service"}),
		"setup-runtime-dry": Setup(SetupParams{Runtime: []string{kubeadm.RuntimeBinary("containerd"), kubeadm.RuntimeBinary("runc")}, Dry: true, NetworkUnits: []string{routesUnit}}),
		// A deployment names the pod routes unit for every host: an etcd host has no such unit to enable.
		"setup-etcd-only": Setup(SetupParams{EtcdOnly: true, Changed: []string{kubeadm.EtcdUnit},
			PodRoutes: "/var/lib/clusterctl/pod-routes", PodRoutesUnit: "clusterctl-pod-routes.service", Networkd: "/etc/systemd/networkd.conf.d/50-clusterctl.conf"}),
		"setup-etcd-worker": Setup(SetupParams{EtcdUnit: true, NetworkUnits: []string{routesUnit}}),
		"setup-cis":         Setup(SetupParams{Changed: []string{kubeadm.SysctlConfig}, PrivateDirs: []string{kubeadm.EtcdDataDir}, EtcdUser: &EtcdUser{UID: 999, GID: 998}}),
		"etcd-data-owner":   EtcdDataOwner(EtcdUser{UID: 999, GID: 998}),
		"setup-partial":     Setup(SetupParams{Changed: []string{kubeadm.ImagesDir + "/flannel.tar"}, Images: []Image{{File: kubeadm.ImagesDir + "/flannel.tar", Ref: "ghcr.io/flannel-io/flannel:v0.28.10"}}, Partial: true}),
		"setup-partial-snapshots": Setup(SetupParams{Images: []Image{{File: kubeadm.ImagesDir + "/etcd.tar", Ref: "registry.k8s.io/etcd:3.7.0",
			Pinned: "registry.k8s.io/etcd@sha256:4b2f0c0e5b0d0f6c3f8a2e1d9c7b6a5f4e3d2c1b0a99887766554433221100ff"}}, Partial: true, Snapshots: true}),
		"etcd":            Etcd(EtcdParams{RestartTimeout: 120}),
		"kubelet-worker":  Kubelet(KubeletParams{Inputs: []string{kubeadm.KubeletConfig, kubeadm.Binary("kubelet")}}),
		"kubelet-restart": Kubelet(KubeletParams{Inputs: []string{kubeadm.KubeletConfig, kubeadm.KubeletKubeconfig}, Restart: true, Dry: true}),
		"routes": Routes(RoutesParams{Inputs: []string{"/etc/systemd/system/clusterctl-pod-routes.service", "/var/lib/clusterctl/pod-routes"},
			RoutesFile: "/var/lib/clusterctl/pod-routes", Networkd: "/etc/systemd/networkd.conf.d/clusterctl.conf", Owned: "/var/lib/clusterctl/pod-routes.networkd",
			Hook: "/var/lib/clusterctl/pod-routes-hook", Addr: "10.0.0.10", Name: "clusterctl-pod-routes.service"}),
		"node-state":              NodeState(),
		"diagnose":                Diagnose(),
		"pids":                    PIDs("kube-apiserver"),
		"stop-static-pods":        StopStaticPods([]string{kubeadm.ControllerManager, kubeadm.Scheduler}, 3000, ""),
		"stop-static-pods-keep":   StopStaticPods([]string{kubeadm.APIServer}, 3000, kubeadm.StateDir+"/rollback/v1.37.2/control-plane"),
		"rollback":                Rollback(RollbackParams{Dir: kubeadm.StateDir + "/rollback/v1.37.2/control-plane", Except: kubeadm.ManifestsDir, Runtime: []string{kubeadm.RuntimeBinary("containerd")}}),
		"rollback-drop":           Rollback(RollbackParams{Dir: kubeadm.StateDir + "/rollback", Drop: true}),
		"restart-containers":      RestartContainers("kube-system", "kube-proxy", 300),
		"remove-files":            RemoveFiles(kubeadm.PKIDir+"/ca-signer.crt", kubeadm.PKIDir+"/ca-signer.key"),
		"read-cert":               ReadCert(kubeadm.KubeletServerCurrent),
		"switch-client":           SwitchKubeletClient("kubelet-client-2026-11-23-15-40-00.pem", true),
		"switch-client-only":      SwitchKubeletClient("kubelet-client-2026-11-23-15-40-00.pem", false),
		"renew-serving":           RenewServing(kubeadm.KubeletServerCurrent),
		"pod-tokens":              PodTokens(kubeadm.KubeletPodsDir),
		"certs":                   Certs(),
		"facts":                   Facts(FactsParams{Socket: "/run/containerd/containerd.sock", AskCRI: true, VersionCache: kubeadm.VersionCache, Commands: []string{"ip", "kubelet"}, Files: []string{kubeadm.KubeletKubeconfig}, Dirs: []string{kubeadm.EtcdDataDir}, CNIBinDirs: []string{"/opt/cni/bin"}, MemberPath: kubeadm.MemberPath, CACert: kubeadm.CACert, Stamp: kubeadm.HostStamp, ConnPorts: []int{6443, kubeadm.PortEtcdClient, kubeadm.PortEtcdPeer}}),
		"netfacts":                NetFacts(),
		"stamp":                   Stamp(StampParams{Path: kubeadm.HostStamp, Digest: "0123abcd", Paths: []string{kubeadm.MemberPath, kubeadm.KubeletKubeconfig}, Routes: "/etc/clusterctl/pod-routes"}),
		"listen-ipv6":             Listen("fd00:10::11", 2380),
		"listen-wait":             ListenWait(6443),
		"probe-ipv6":              Probe("fd00:10::11", 6443),
		"probe-dotted-name":       Probe("cp1.lab.example.com", 7443),
		"etcd-hold":               HoldControlPlane(EtcdHold, kubeadm.ManifestsDir, 240),
		"etcd-restore-check":      RestoreCheck(restoreCheck),
		"etcd-restore-check-unit": RestoreCheck(RestoreCheckParams{Etcdutl: restoreCheck.Etcdutl, Unit: kubeadm.EtcdUnit}),
		"etcd-release":            ReleaseManifests(EtcdHold, kubeadm.ManifestsDir, "etcd.yaml"),
		"etcd-restore":            RestoreEtcd(EtcdRestoreParams{Snapshot: kubeadm.StateDir + "/etcd-restore/snapshot.db", Name: "cp1.lab", PeerURL: "https://[fd00:10::11]:2380", InitialCluster: "cp1.lab=https://[fd00:10::11]:2380,cp2=https://10.0.0.12:2380", Token: "restore-'$(id)'", Bump: 1000000000}),
		"reset":                   Reset([]string{kubeadm.Binary("kubelet"), kubeadm.Binary("kubectl")}, []string{kubeadm.RuntimeBinary("runc"), kubeadm.ContainerdUnit}, "/var/lib/clusterctl/backup", ".absent", testNetwork, "/var/lib/etcd-snapshots"),
		"reset-plan":              ResetPlan([]string{kubeadm.Binary("kubelet")}, nil, "/var/lib/clusterctl/backup", testNetwork, "/var/lib/etcd-snapshots"),
	}
	for name, script := range cases {
		file := filepath.Join("testdata", name+".sh")
		if *update {
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (go test ./tasks/scripts -update writes it)", err)
		}
		if string(want) != script {
			t.Errorf("%s differs from %s (go test ./tasks/scripts -update rewrites it; review the diff):\n%s", name, file, script)
		}
		if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v: %s", name, err, out)
		}
	}
}

// pgrep -x matches a process's name, the first 15 bytes of its program's: the controller-manager's is
// "kube-controller".
func TestStopStaticPodsProcessNames(t *testing.T) {
	s := StopStaticPods([]string{kubeadm.ControllerManager, kubeadm.Etcd}, 5, "")
	if !strings.Contains(s, "for p in kube-controller etcd;") || !strings.Contains(s, "rm -f /etc/kubernetes/manifests/kube-controller-manager.yaml /etc/kubernetes/manifests/etcd.yaml\n") {
		t.Errorf("StopStaticPods:\n%s", s)
	}
}

// TestRollbackPutsBack runs the rollback script on this machine's files (systemctl a stub): kept files go
// back over their paths, absent markers remove theirs, the excepted directory's stay kept, and Drop
// forgets the rest.
func TestRollbackPutsBack(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "systemctl"), "#!/bin/sh\nexit 0\n")
	write(filepath.Join(bin, "ctr"), "#!/bin/sh\necho \"$@\" >> "+filepath.Join(root, "ctr.log")+"\n")
	for _, stub := range []string{"systemctl", "ctr"} {
		if err := os.Chmod(filepath.Join(bin, stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kept := filepath.Join(root, "kept")
	etc, man := filepath.Join(root, "etc"), filepath.Join(root, "manifests")
	write(filepath.Join(etc, "a.conf"), "new")
	write(kept+filepath.Join(etc, "a.conf"), "old")
	write(filepath.Join(etc, "added.conf"), "new")
	write(kept+filepath.Join(etc, "added.conf")+transport.AbsentSuffix, "")
	write(filepath.Join(man, "kube-apiserver.yaml"), "new")
	write(kept+filepath.Join(man, "kube-apiserver.yaml"), "old")
	run := func(p RollbackParams) string {
		t.Helper()
		p.Stamps = filepath.Join(root, "stamps")
		cmd := exec.Command("sh", "-s")
		cmd.Stdin = strings.NewReader(Rollback(p))
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rollback: %v\n%s", err, out)
		}
		return string(out)
	}
	images := filepath.Join(root, "images")
	write(kept+images+"/kube-apiserver.tar", "old image")
	out := run(RollbackParams{Dir: kept, Except: man, ImagesDir: images})
	if log, _ := os.ReadFile(filepath.Join(root, "ctr.log")); !strings.Contains(string(log), "k8s.io images import "+kept+images+"/kube-apiserver.tar") ||
		!strings.Contains(out, "action: import image "+images+"/kube-apiserver.tar") {
		t.Errorf("the old image archive is not imported again: %q\n%s", log, out)
	}
	if !strings.Contains(out, "action: put back "+filepath.Join(etc, "a.conf")) || !strings.Contains(out, "action: remove "+filepath.Join(etc, "added.conf")) || strings.Contains(out, "kube-apiserver.yaml") {
		t.Errorf("actions:\n%s", out)
	}
	for p, want := range map[string]string{filepath.Join(etc, "a.conf"): "old", filepath.Join(man, "kube-apiserver.yaml"): "new", kept + filepath.Join(man, "kube-apiserver.yaml"): "old"} {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("%s = %q %v, want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(etc, "added.conf")); !os.IsNotExist(err) {
		t.Errorf("added.conf, which was not there before, is still there: %v", err)
	}
	if out := run(RollbackParams{Dir: kept, Except: man, ImagesDir: images}); strings.Contains(out, "action: put back") {
		t.Errorf("a second rollback put back again:\n%s", out)
	}
	run(RollbackParams{Dir: kept, Drop: true})
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Errorf("the kept files are still there after Drop: %v", err)
	}
	if out := run(RollbackParams{Dir: kept}); strings.TrimSpace(out) != "none" {
		t.Errorf("nothing kept: %q", out)
	}
}
