package playbooks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The setup script takes image names and archive paths from the artifacts manifest: each reaches ctr as one
// argument, whatever it holds. Fakes of ctr and systemctl on PATH record their arguments.
func TestSetupScriptQuotesImages(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "log")
	fake := "#!/bin/sh\nfor a in \"$@\"; do printf '%s|' \"$a\" >>" + log + "; done; echo >>" + log + "\n"
	for _, name := range []string{"ctr", "systemctl", "modprobe", "sysctl"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hostile := image{file: "/opt/images/x.tar; touch " + filepath.Join(bin, "pwned"), ref: "registry.k8s.io/pause:3.10'$(id)'"}
	script := setupScript(map[string]bool{}, []image{hostile}, false)
	// The script keeps its stamps under /var/lib/clusterctl and reads /etc: point both at the test's directory.
	script = strings.ReplaceAll(strings.ReplaceAll(script, "/var/lib/clusterctl/", bin+"/"), "/etc/", bin+"/etc/")
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(bin, "pwned")); err == nil {
		t.Fatal("an image path ran a command")
	}
	data, _ := os.ReadFile(log)
	if !strings.Contains(string(data), "-n|k8s.io|images|ls|-q|name=="+hostile.ref+"|") {
		t.Errorf("ctr did not get the image name as one argument:\n%s", data)
	}
}
