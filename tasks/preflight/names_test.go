package preflight

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckIgnored(t *testing.T) {
	names := CheckNames()
	for _, want := range []string{"Swap", "NumCPU", "FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml", "KernelDefaults", "ClockSkew", "Port-10250"} {
		if !slices.Contains(names, want) {
			t.Errorf("CheckNames lacks %s", want)
		}
	}
	for _, ok := range [][]string{{"all"}, {"swap", "Port-6444"}, {"NumCPU", " Mem"}} {
		if err := CheckIgnored(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	if err := CheckIgnored([]string{"Swap", "Nope"}); err == nil || !strings.Contains(err.Error(), `"Nope" is no preflight check; the checks: all, `) || !strings.Contains(err.Error(), "Swap") {
		t.Errorf("Nope: %v", err)
	}
	if err := CheckIgnored([]string{"SSH"}); err == nil || !strings.Contains(err.Error(), "SSH is never ignored") {
		t.Errorf("SSH: %v", err)
	}
}
