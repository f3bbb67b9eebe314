package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// StartProxyClient starts a client of the control-plane endpoint as nodes see it: host's node-local API
// proxy on 127.0.0.1:7443, reached through an SSH forward from here, as the cluster's admin, one request
// every 50 ms. stop ends it and returns the requests that succeeded and those that failed (with times).
func StartProxyClient(t testing.TB, c *Cluster, host string) (stop func() (int, []string)) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	fwd := exec.Command("ssh", "-F", c.Lab.SSHConfig(), "-N", "-o", "ExitOnForwardFailure=yes",
		"-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:7443", port), host)
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Admin())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	cfg.Timeout = proxyClientTimeout
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err = kube.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			break
		}
		if i > 50 {
			_ = fwd.Process.Kill()
			_ = fwd.Wait()
			t.Fatalf("no answer through %s's proxy: %v", host, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	quit := make(chan struct{})
	type result struct {
		ok     int
		failed []string
	}
	done := make(chan result)
	go func() {
		var r result
		for {
			select {
			case <-quit:
				done <- r
				return
			default:
			}
			if _, err := kube.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
				r.failed = append(r.failed, time.Now().Format("15:04:05.000")+" "+err.Error())
			} else {
				r.ok++
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var once sync.Once
	var r result
	stop = func() (int, []string) {
		once.Do(func() {
			close(quit)
			r = <-done
			_ = fwd.Process.Kill()
			_ = fwd.Wait()
		})
		return r.ok, r.failed
	}
	t.Cleanup(func() { stop() })
	return stop
}

// ProxyLog is the end of host's node-local proxy's log (haproxy logs each backend going down or up).
func ProxyLog(t testing.TB, c *Cluster, host string) string {
	t.Helper()
	return c.Lab.Run(t, host, `for id in $(crictl ps -a -q --name clusterctl-apiserver-proxy 2>/dev/null); do crictl logs --timestamps --tail 40 "$id" 2>&1; done; true`)
}

// firstTen is the first ten of list: what a failure message shows of many.
func firstTen(list []string) []string {
	if len(list) > 10 {
		return list[:10]
	}
	return list
}
