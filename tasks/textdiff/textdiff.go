// Package textdiff writes the unified diff of two texts, as diff -u does, for what a dry run shows: the
// values of a Helm release before and after, a managed file on a host against what would be written.
package textdiff

import (
	"fmt"
	"strings"
)

// maxCells bounds the work of one diff (lines of a times lines of b): past it, the whole of a is shown
// replaced by the whole of b, which is still a correct diff.
const maxCells = 4 << 20

// Unified is the diff from a to b with context lines around each change, headed --- aName and +++ bName;
// "" when the texts are equal.
func Unified(aName, bName, a, b string, context int) string {
	if a == b {
		return ""
	}
	al, bl := lines(a), lines(b)
	ops := edits(al, bl)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// a hunk: from context lines before the first change to context lines after the last change
		// that is followed by no more than 2*context unchanged lines
		start := max(0, i-context)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*context {
				break
			}
		}
		end = min(len(ops), end+context+1)
		aStart, bStart, aLen, bLen := ops[start].a, ops[start].b, 0, 0
		var body strings.Builder
		for _, op := range ops[start:end] {
			body.WriteByte(op.kind)
			body.WriteString(op.text)
			body.WriteByte('\n')
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n%s", span(aStart, aLen), span(bStart, bLen), body.String())
		i = end
	}
	return out.String()
}

// span is a hunk's range as diff -u writes it (1-based; a start before the first line when empty).
func span(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// op is one line of the diff: kept (' '), removed ('-') or added ('+'), with its index in a and b.
type op struct {
	kind byte
	text string
	a, b int
}

// edits is a shortest edit script by the longest common subsequence of lines.
func edits(a, b []string) []op {
	if len(a)*len(b) > maxCells {
		var out []op
		for i, l := range a {
			out = append(out, op{'-', l, i, 0})
		}
		for j, l := range b {
			out = append(out, op{'+', l, len(a), j})
		}
		return out
	}
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:]
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, op{' ', a[i], i, j})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, op{'-', a[i], i, j})
			i++
		default:
			out = append(out, op{'+', b[j], i, j})
			j++
		}
	}
	return out
}
