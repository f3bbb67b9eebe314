#!/usr/bin/env bash
# report.sh LOG: what make test prints of the lab tests' `go test -v` output: for each top-level test that
# failed, the last lines it wrote (parallel tests interleave; go test names the test a line belongs to with
# "=== RUN/CONT/NAME"), then every top-level test with its result and time, then (last, where a CI log's tail
# shows them) the last lines of each failed innermost subtest, each line cut to 240 characters.
set -euo pipefail
log=${1:?usage: report.sh LOG}
lines=${REPORT_LINES:-60}

# lines_of NAME top|full: the lines the test NAME wrote, by the top-level test or the full subtest name each
# line belongs to.
lines_of() {
	awk -v want="$1" -v by="$2" '
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; if (by == "top") { split(cur, p, "/"); cur = p[1] }; next }
		/^ *(--- |ok |FAIL|PASS$)/ { next }
		cur == want { print }
	' "$log"
}

mapfile -t failed < <(grep -oE '^--- FAIL: [^ ]+' "$log" | cut -d' ' -f3 | sort -u)
for name in "${failed[@]}"; do
	echo "make test: the last $lines lines $name wrote:"
	lines_of "$name" top | tail -n "$lines"
done
echo "make test: lab tests, each with its time (whole output in $log):"
grep -E '^(--- (PASS|FAIL|SKIP)|ok |FAIL|panic:)' "$log" || true

mapfile -t leaves < <(grep -oE '^ *--- FAIL: [^ ]+' "$log" | awk '{print $3}' | sort -u)
for name in "${leaves[@]}"; do
	# an innermost failure: no failed subtest under it
	printf '%s\n' "${leaves[@]}" | grep -qF -- "$name/" && continue
	echo "make test: $name failed; its last lines:"
	lines_of "$name" full | tail -n "${REPORT_LEAF_LINES:-6}" | cut -c1-240
done
