package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// minToolchain is the oldest Go whose standard library has the fixes clusterctl relies on (net/http,
// crypto/x509 up to Go 1.26.6's security releases).
var minToolchain = [3]int{1, 26, 6}

// go.mod names a toolchain (or a go line) at least minToolchain: builds with an older Go switch to it.
func TestToolchain(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	best := [3]int{}
	for _, m := range regexp.MustCompile(`(?m)^(?:go |toolchain go)(\d+)\.(\d+)(?:\.(\d+))?\s*$`).FindAllStringSubmatch(string(data), -1) {
		var v [3]int
		for i := range 3 {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		if less(best, v) {
			best = v
		}
	}
	if less(best, minToolchain) {
		t.Errorf("go.mod asks for Go %d.%d.%d at most: give it `toolchain go%d.%d.%d` or later", best[0], best[1], best[2], minToolchain[0], minToolchain[1], minToolchain[2])
	}
}

func less(a, b [3]int) bool {
	for i := range 3 {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
