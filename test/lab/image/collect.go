package image

import (
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// libDirs are where the dynamic loader looks for libraries on Debian.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// IptablesFiles is what kube-proxy and flanneld run from their images: the iptables tools (nft and legacy
// back ends, as upstream's images ship), their extensions, nft (kube-proxy's nftables mode runs it),
// conntrack, and the files they read.
var IptablesFiles = []string{
	"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
	"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore",
	"/usr/sbin/iptables-nft", "/usr/sbin/iptables-nft-save", "/usr/sbin/iptables-nft-restore",
	"/usr/sbin/ip6tables-nft", "/usr/sbin/ip6tables-nft-save", "/usr/sbin/ip6tables-nft-restore",
	"/usr/sbin/iptables-legacy", "/usr/sbin/iptables-legacy-save", "/usr/sbin/iptables-legacy-restore",
	"/usr/sbin/ip6tables-legacy", "/usr/sbin/ip6tables-legacy-save", "/usr/sbin/ip6tables-legacy-restore",
	"/usr/sbin/nft", "/usr/sbin/conntrack", "/usr/lib/x86_64-linux-gnu/xtables",
	"/etc/protocols", "/etc/services", "/etc/ld.so.cache",
}

// collector is the state of one Collect.
type collector struct {
	root  string
	files map[string]File
	elfs  map[string]bool
}

// Collect copies the files at paths (directories whole) out of the root filesystem at root, following
// symbolic links inside the root (each link kept as a link) and adding the shared libraries (and program
// interpreter) every ELF program among them needs, recursively.
func Collect(root string, paths []string) ([]File, error) {
	c := &collector{root: root, files: map[string]File{}, elfs: map[string]bool{}}
	for _, p := range paths {
		if err := c.add(p); err != nil {
			return nil, err
		}
	}
	out := make([]File, 0, len(c.files))
	for _, f := range c.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// resolve follows every symbolic link of p inside the root, recording each link met, and returns the real
// path (inside the root).
func (c *collector) resolve(p string) (string, error) {
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	for hops := 0; len(rest) > 0; {
		next := path.Join(cur, rest[0])
		rest = rest[1:]
		st, err := os.Lstat(filepath.Join(c.root, next))
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(filepath.Join(c.root, next))
		if err != nil {
			return "", err
		}
		c.files[next] = File{Path: next, Link: target}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		rest = append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), rest...)
		cur = "/"
	}
	return cur, nil
}

func (c *collector) add(p string) error {
	real, err := c.resolve(p)
	if err != nil {
		return err
	}
	host := filepath.Join(c.root, real)
	st, err := os.Stat(host)
	if err != nil {
		return err
	}
	if st.IsDir() {
		entries, err := os.ReadDir(host)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := c.add(path.Join(real, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if _, done := c.files[real]; done {
		return nil
	}
	c.files[real] = File{Path: real, Source: host, Mode: int64(st.Mode().Perm())}
	return c.addLibraries(real, host)
}

// addLibraries adds the program interpreter and the DT_NEEDED libraries of an ELF file, recursively.
func (c *collector) addLibraries(real, host string) error {
	if c.elfs[real] {
		return nil
	}
	c.elfs[real] = true
	f, err := elf.Open(host)
	if err != nil {
		return nil // not an ELF file
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			buf := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(buf, 0); err != nil {
				return err
			}
			if err := c.add(strings.TrimRight(string(buf), "\x00")); err != nil {
				return fmt.Errorf("%s: interpreter: %w", real, err)
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil
	}
	for _, lib := range libs {
		found := false
		for _, dir := range libDirs {
			candidate := path.Join(dir, lib)
			if _, err := c.resolve(candidate); err == nil {
				if err := c.add(candidate); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which is not in the root filesystem", real, lib)
		}
	}
	return nil
}
