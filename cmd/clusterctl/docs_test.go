package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// markdown is README.md, CHANGELOG.md and every file of docs/.
func markdown(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md", "../../CHANGELOG.md"}, files...)
}

// slug is the anchor GitHub makes of a heading.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`).ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// anchors are the headings' anchors of a Markdown file (outside code blocks).
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fence := false
	for _, l := range strings.Split(string(readTestFile(t, file)), "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && !fence && strings.HasPrefix(l, "#") {
			out[slug(h)] = true
		}
	}
	return out
}

// Every relative link of the docs resolves: the file exists, and so does the heading an anchor names.
func TestDocsLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range markdown(t) {
		for _, m := range link.FindAllStringSubmatch(string(readTestFile(t, file)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link to %s: %v", file, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest)[anchor] {
				t.Errorf("%s: link to %s: no such heading in %s", file, target, dest)
			}
		}
	}
}

// Every clusterctl command line the docs show (in code blocks, and in code spans without placeholders
// such as [--yes] or A|B) is one clusterctl accepts: the command exists and takes those flags.
func TestDocsCommandLines(t *testing.T) {
	span := regexp.MustCompile("`(clusterctl [^`]+)`")
	n := 0
	check := func(file, line string) {
		for _, cut := range []string{" #", " >", " |", " &&", ";", " 2>"} {
			if i := strings.Index(line, cut); i > 0 {
				line = line[:i]
			}
		}
		if strings.ContainsAny(line, "[]|…<>$") || strings.Contains(line, "...") {
			return
		}
		args := strings.Fields(line)[1:]
		root := newRootCmd(io.Discard, io.Discard)
		root.InitDefaultVersionFlag() // cobra adds --version when it executes
		cmd, rest, err := root.Find(args)
		if err == nil {
			cmd.InitDefaultHelpFlag()
			err = cmd.ParseFlags(rest)
		}
		if err != nil || (cmd == root && len(rest) > 0 && !strings.HasPrefix(rest[0], "-")) {
			t.Errorf("%s: %q is not a clusterctl command line: %v", file, line, err)
		}
		n++
	}
	for _, file := range markdown(t) {
		fence := false
		for _, l := range strings.Split(string(readTestFile(t, file)), "\n") {
			if strings.HasPrefix(l, "```") {
				fence = !fence
				continue
			}
			if fence {
				if c, ok := strings.CutPrefix(strings.TrimPrefix(strings.TrimSpace(l), "$ "), "clusterctl "); ok {
					check(file, "clusterctl "+c)
				}
				continue
			}
			for _, m := range span.FindAllStringSubmatch(l, -1) {
				check(file, m[1])
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d command lines checked", n)
	}
	t.Logf("%d command lines checked", n)
}
