// Command putbench measures pushing files to many hosts with clusterctl's transport: the first time (every
// file written atomically) and again unchanged (one hash round trip per host, nothing written).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/transport"
)

func main() {
	hostsFile := flag.String("hosts", "", "file with one address per line")
	keyFile := flag.String("key", "", "private key")
	known := flag.String("known-hosts", "", "known_hosts file")
	dir := flag.String("dir", "/tmp/clusterctl-putbench", "remote directory (each host gets DIR/<address>/)")
	files := flag.Int("files", 10, "files per host")
	size := flag.Int("size", 16<<10, "bytes per file")
	limit := flag.Int("limit", 100, "hosts at once")
	flag.Parse()
	if err := run(*hostsFile, *keyFile, *known, *dir, *files, *size, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "putbench:", err)
		os.Exit(1)
	}
}

func run(hostsFile, keyFile, known, dir string, nfiles, size, limit int) error {
	f, err := os.Open(hostsFile)
	if err != nil {
		return err
	}
	var hosts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() != "" {
			hosts = append(hosts, sc.Text())
		}
	}
	f.Close()
	d, err := transport.NewDialer(transport.Options{ClusterKnownHosts: known, KnownHosts: []string{}, SSHConfig: "none", Keepalive: -1})
	if err != nil {
		return err
	}
	data := make([][]byte, nfiles)
	for i := range data {
		data[i] = make([]byte, size)
		_, _ = rand.Read(data[i])
	}
	ctx := context.Background()
	// Connections are made first and reused, as within one clusterctl run: the pushes are what is timed.
	conns := map[string]*transport.Conn{}
	var mu sync.Mutex
	if _, err := transport.Fanout(ctx, "connect", hosts, transport.Policy{Limit: limit}, nil, func(ctx context.Context, h string) (bool, error) {
		c, err := d.Dial(ctx, transport.Target{Name: h, Address: h, User: "root", IdentityFiles: []string{keyFile}})
		if err != nil {
			return false, err
		}
		if _, err := c.SFTP(ctx); err != nil {
			return false, err
		}
		mu.Lock()
		conns[h] = c
		mu.Unlock()
		return false, nil
	}); err != nil {
		return err
	}
	push := func() (time.Duration, int, error) {
		start := time.Now()
		changed := 0
		res, err := transport.Fanout(ctx, "put", hosts, transport.Policy{Limit: limit}, nil, func(ctx context.Context, h string) (bool, error) {
			c := conns[h]
			fs := make([]transport.File, nfiles)
			for i := range fs {
				fs[i] = transport.File{Path: fmt.Sprintf("%s/%s/file%02d", dir, h, i), Data: data[i], Mode: 0o644}
			}
			ch, err := c.Put(ctx, fs)
			any := false
			for _, x := range ch {
				any = any || x
			}
			return any, err
		})
		for _, r := range res {
			if r.Status == transport.StatusChanged {
				changed++
			}
		}
		return time.Since(start), changed, err
	}
	first, c1, err := push()
	if err != nil {
		return err
	}
	again, c2, err := push()
	if err != nil {
		return err
	}
	fmt.Printf("hosts=%d files=%d size=%d first_ms=%d first_changed=%d unchanged_ms=%d unchanged_changed=%d ratio=%.2f\n",
		len(hosts), nfiles, size, first.Milliseconds(), c1, again.Milliseconds(), c2, float64(again)/float64(first))
	return nil
}
