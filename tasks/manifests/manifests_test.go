package manifests

import (
	"bytes"
	"regexp"
	"testing"
)

var uidRE = regexp.MustCompile(`(?m)^  uid: ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// A static Pod's UID is the manifest's own: the same manifest and node give the same UID (a kubelet of
// another version does not see a new Pod), another node or another manifest another one.
func TestMarshalUID(t *testing.T) {
	pod := APIServerProxy("docker.io/library/haproxy:3.2", "/etc/kubernetes/clusterctl-apiserver-proxy.cfg", "abc", 7443)
	a, err := Marshal(pod, "w1")
	if err != nil {
		t.Fatal(err)
	}
	m := uidRE.FindSubmatch(a)
	if m == nil {
		t.Fatalf("no uid:\n%s", a)
	}
	if b, _ := Marshal(pod, "w1"); !bytes.Equal(a, b) {
		t.Error("the same manifest marshalled twice differs")
	}
	if pod.UID != "" {
		t.Error("Marshal changed the Pod it was given")
	}
	if b, _ := Marshal(pod, "w2"); bytes.Equal(uidRE.FindSubmatch(b)[1], m[1]) {
		t.Error("two nodes' manifests have the same UID")
	}
	other := APIServerProxy("docker.io/library/haproxy:3.2", "/etc/kubernetes/clusterctl-apiserver-proxy.cfg", "abd", 7443)
	if b, _ := Marshal(other, "w1"); bytes.Equal(uidRE.FindSubmatch(b)[1], m[1]) {
		t.Error("a changed manifest kept its UID")
	}
}
