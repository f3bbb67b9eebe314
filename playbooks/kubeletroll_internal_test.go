package playbooks

import (
	"slices"
	"testing"
)

// Kubelets restart control-plane node by control-plane node, in the order given, then the workers
// KubeletBatch at a time (0 is one).
func TestKubeletBatches(t *testing.T) {
	e := testEnv(cp, cp, worker, worker)
	for _, c := range []struct {
		batch int
		hosts []string
		want  [][]string
	}{
		{0, []string{"cp1", "cp2", "w1", "w2"}, [][]string{{"cp1"}, {"cp2"}, {"w1"}, {"w2"}}},
		{2, []string{"cp1", "cp2", "w1", "w2"}, [][]string{{"cp1"}, {"cp2"}, {"w1", "w2"}}},
		{5, []string{"w2", "cp2", "w1"}, [][]string{{"cp2"}, {"w2", "w1"}}},
		{1, []string{"w1"}, [][]string{{"w1"}}},
		{1, nil, nil},
	} {
		d, _, err := newDeployment(e, e.Hosts, deployOptions{KubeletBatch: c.batch})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.kubeletBatches(c.hosts); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("batch %d of %v: %v, want %v", c.batch, c.hosts, got, c.want)
		}
	}
}
