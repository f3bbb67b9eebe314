// Command dnsq asks a DNS server for a name until it answers, and exits 0 then (1 after the timeout):
// make bench-kubeadm runs it on a cluster's first node as its "CoreDNS answers" check, the same for the
// cluster clusterctl made and the one kubeadm made. The hosts have no DNS tools of their own.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	server := flag.String("server", "10.96.0.10:53", "the DNS server (the cluster's DNS Service)")
	name := flag.String("name", "kubernetes.default.svc.cluster.local", "the name to look up")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long to keep asking")
	flag.Parse()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", *server)
	}}
	deadline := time.Now().Add(*timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addrs, err := r.LookupHost(ctx, *name)
		cancel()
		if err == nil && len(addrs) > 0 {
			fmt.Println(*name, addrs)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "dnsq: %s from %s: %v\n", *name, *server, err)
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
