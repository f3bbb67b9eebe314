package preflight

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/facts"
)

// FuzzParseFacts feeds the facts parser arbitrary output, as a hostile host could send: it must never panic,
// and what it accepts goes through every check without panicking.
//
//	go test ./tasks/preflight -run '^$' -fuzz FuzzParseFacts -fuzztime 60s
func FuzzParseFacts(fz *testing.F) {
	files, _ := filepath.Glob("../facts/testdata/facts-*.txt")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			fz.Fatal(err)
		}
		fz.Add(data)
	}
	fz.Add([]byte("listen=0100007F:1A0B 0A\naddr=eth0 10.0.0.1/24\nclock=-99999999999999999999\nmem_kb=x\n"))
	fz.Fuzz(func(t *testing.T, out []byte) {
		f, err := facts.ParseFacts("h1", out)
		if err != nil {
			return
		}
		_ = f.NodeIPs()
		_ = f.ListensOn(6443)
		_ = f.HasAddress("10.0.0.1")
		for _, set := range []CheckSet{SetInit, SetControlPlaneJoin, SetJoin, SetEtcd} {
			_ = Run(f, &Node{Set: set, NodeName: "h1", KubernetesVersion: "v1.37.2", APIServerPort: 6443,
				CRISocket: "unix:///run/containerd/containerd.sock", ServiceSubnet: "10.96.0.0/12", PodSubnet: "10.244.0.0/16"})
		}
		_ = CrossHostChecks([]*facts.Facts{f, f}, 5*time.Second)
	})
}
