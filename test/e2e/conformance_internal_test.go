package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The parallel and serial reports merge into one result a test, the run that ran it winning over the one
// that skipped it; the summary counts them and gives each failure and each lab skip its reason.
func TestConformanceReportsMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(`<?xml version="1.0"?><testsuites><testsuite name="e2e">`+body+`</testsuite></testsuites>`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parallel := write("p.xml", `
<testcase name="[It] [sig-a] A works [Conformance]" status="passed" time="3"></testcase>
<testcase name="[It] [sig-a] B fails [Conformance]" status="failed" time="9"><failure message="boom&#xA;detail"></failure></testcase>
<testcase name="[It] [sig-a] C serial [Conformance] [Serial]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-b] D lab [Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-a] E not conformance" status="failed" time="1"></testcase>`)
	serial := write("s.xml", `
<testcase name="[It] [sig-a] A works [Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-a] C serial [Conformance] [Serial]" status="timedout" time="600"><failure message="timed out"></failure></testcase>`)
	results := mergeJUnit(t, "[Conformance]", parallel, serial)
	got := map[string]string{}
	for _, r := range results {
		got[r.name] = r.status
	}
	want := map[string]string{"[sig-a] A works [Conformance]": "passed", "[sig-a] B fails [Conformance]": "failed",
		"[sig-a] C serial [Conformance] [Serial]": "timedout", "[sig-b] D lab [Conformance]": "skipped"}
	if len(got) != len(want) {
		t.Errorf("results %v, want %v", got, want)
	}
	for name, status := range want {
		if got[name] != status {
			t.Errorf("%s: %q, want %q", name, got[name], status)
		}
	}
	summary := summarize(results, []conformanceSkip{{`\[sig-b\] D lab`, "needs what the lab lacks"}}, []string{""}, true)
	for _, want := range []string{"tests: 4; passed 1, failed 2, skipped 1", "B fails [Conformance] (9 s)\n    boom\n",
		"C serial", "D lab [Conformance]\n    lab: needs what the lab lacks"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	if focused := summarize(results, nil, []string{`\[sig-b\]`}, false); !strings.Contains(focused, "tests: 1;") {
		t.Errorf("focused on sig-b:\n%s", focused)
	}

	// B passes when run again alone, C times out again: B is a pass that says so, C stays a failure.
	retry := mergeJUnit(t, "[Conformance]", write("r.xml", `
<testcase name="[It] [sig-a] B fails [Conformance]" status="passed" time="4"></testcase>
<testcase name="[It] [sig-a] C serial [Conformance] [Serial]" status="timedout" time="600"><failure message="timed out"></failure></testcase>`))
	summary = summarize(retryResults(results, retry), nil, []string{""}, true)
	for _, want := range []string{"tests: 4; passed 2, failed 1, skipped 1", "passed when run again alone (1)", "B fails [Conformance]\n    first run: boom\n", "failed:\n  [sig-a] C serial"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary after the retry lacks %q:\n%s", want, summary)
		}
	}
}

// The focus a failed test is run again with is its JUnit name without the labels, which ginkgo does not match.
func TestSpecText(t *testing.T) {
	for name, want := range map[string]string{
		"[sig-node] Probing container should *not* be restarted with a GRPC liveness probe [Conformance] [NodeConformance] [sig-node, NodeConformance, Conformance]": "[sig-node] Probing container should *not* be restarted with a GRPC liveness probe [Conformance] [NodeConformance]",
		"[sig-a] B fails [Conformance]": "[sig-a] B fails [Conformance]",
	} {
		if got := specText(name); got != want {
			t.Errorf("specText(%q) = %q, want %q", name, got, want)
		}
	}
}

// The networking part is the focused run's sig-network tests and the pod network's granular checks.
func TestConformanceNetworking(t *testing.T) {
	for _, f := range conformanceFocused {
		if strings.HasPrefix(f, `\[sig-network\]`) && !slices.Contains(conformanceNetwork, f) {
			t.Errorf("the focused run's %q is not in the networking part", f)
		}
	}
	if !strings.Contains(strings.Join(conformanceNetwork, " "), "Networking Granular Checks") {
		t.Errorf("conformanceNetwork: %q", conformanceNetwork)
	}
}
