package kubelet

import "testing"

func TestFlagsRefuseHostileValues(t *testing.T) {
	if _, err := Flags("10.0.0.1", "w1", true, [][2]string{{"max-pods", "110"}}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1\nLD_PRELOAD=/tmp/x.so", "1\" LD_PRELOAD=\"/x", "a b", "$(id)", "x;y", `a\`} {
		if data, err := Flags("10.0.0.1", "w1", true, [][2]string{{"v", v}}); err == nil {
			t.Errorf("%q accepted:\n%s", v, data)
		}
	}
}
