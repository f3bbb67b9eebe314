package reboot

import (
	"slices"
	"strings"
	"testing"
)

func TestParseState(t *testing.T) {
	const id = "0f5b7c0e-3d4a-4e55-9a51-7d9e1c2b3a4f"
	for _, tc := range []struct {
		out   string
		want  State
		error string
	}{
		{out: id + "\n", want: State{BootID: id}},
		{out: id + "\nreboot-required\n", want: State{BootID: id, Needs: "reboot-required"}},
		{out: id + "\nneeds-restarting\n", want: State{BootID: id, Needs: "needs-restarting"}},
		{out: "", error: "not a UUID"},
		{out: "0F5B7C0E-3D4A-4E55-9A51-7D9E1C2B3A4F\n", error: "not a UUID"},
		{out: id + "; reboot\n", error: "not a UUID"},
		{out: id + "\nsomething else\n", error: "neither"},
		{out: id + "\nreboot-required\nmore\n", error: "3 lines"},
		{out: id + "\n" + strings.Repeat("x", 300), error: "more than"},
	} {
		got, err := ParseState(tc.out)
		if tc.error != "" {
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("ParseState(%q) = %+v, %v; want an error with %q", tc.out, got, err, tc.error)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseState(%q) = %+v, %v; want %+v", tc.out, got, err, tc.want)
		}
	}
}

func TestBatches(t *testing.T) {
	hosts := []string{"w1", "w2", "w3", "w4", "w5"}
	for n, want := range map[int]string{0: "w1|w2|w3|w4|w5", 1: "w1|w2|w3|w4|w5", 2: "w1 w2|w3 w4|w5", 5: "w1 w2 w3 w4 w5", 9: "w1 w2 w3 w4 w5"} {
		var got []string
		for _, b := range Batches(hosts, n) {
			got = append(got, strings.Join(b, " "))
		}
		if g := strings.Join(got, "|"); g != want {
			t.Errorf("Batches(%d) = %s, want %s", n, g, want)
		}
	}
	if b := Batches([]string(nil), 2); len(b) != 0 {
		t.Errorf("Batches(nil) = %v", b)
	}
	if !slices.Equal(hosts, []string{"w1", "w2", "w3", "w4", "w5"}) {
		t.Error("Batches changed its input")
	}
}
