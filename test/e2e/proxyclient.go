package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// StartProxyClient starts a client of the control-plane endpoint as nodes see it: host's node-local API
// proxy on 127.0.0.1:7443, reached through an SSH forward from here, as the cluster's admin, one request
// every 50 ms. stop ends it and returns the requests that succeeded and those that failed (with times).
func StartProxyClient(t testing.TB, c *Cluster, host string) (stop func() (int, []string)) {
	t.Helper()
	return startProxyClient(t, c, host, func(ctx context.Context, kube kubernetes.Interface, _ int) error {
		_, err := kube.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// StartSecretClient is StartProxyClient's client writing Secrets and reading them back: each request
// creates a Secret, reads it (through whichever API server the proxy picks, perhaps not the one that
// wrote it), checks its data and deletes it.
func StartSecretClient(t testing.TB, c *Cluster, host string) (stop func() (int, []string)) {
	t.Helper()
	return startProxyClient(t, c, host, func(ctx context.Context, kube kubernetes.Interface, i int) error {
		name := fmt.Sprintf("e2e-secret-client-%d", i)
		secrets := kube.CoreV1().Secrets("default")
		want := []byte(name)
		if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"v": want}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		got, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if string(got.Data["v"]) != name {
			return fmt.Errorf("%s reads %q", name, got.Data["v"])
		}
		if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	})
}

// startProxyClient runs req (the i-th request) every 50 ms through host's node-local proxy.
func startProxyClient(t testing.TB, c *Cluster, host string, req func(ctx context.Context, kube kubernetes.Interface, i int) error) (stop func() (int, []string)) {
	t.Helper()
	fwd, kube := proxyTunnel(t, c, host)
	quit := make(chan struct{})
	type result struct {
		ok     int
		failed []string
		// slowest is the longest a request took (ok or not), and when it started.
		slowest   time.Duration
		slowestAt time.Time
	}
	done := make(chan result)
	go func() {
		var r result
		for i := 0; ; i++ {
			select {
			case <-quit:
				done <- r
				return
			default:
			}
			start := time.Now()
			err := req(context.Background(), kube, i)
			if d := time.Since(start); d > r.slowest {
				r.slowest, r.slowestAt = d, start
			}
			if err != nil {
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
			t.Logf("requests through %s's proxy: %d ok, %d failed; the slowest took %s (started %s)", host, r.ok, len(r.failed),
				r.slowest.Round(time.Millisecond), r.slowestAt.Format("15:04:05.000"))
			if len(r.failed) > 0 {
				t.Logf("%s's proxy's log:\n%s", host, ProxyLog(t, c, host))
			}
		})
		return r.ok, r.failed
	}
	t.Cleanup(func() { stop() })
	return stop
}

// proxyTunnel forwards a local port to host's node-local proxy over SSH and returns a client through it, once it answers.
func proxyTunnel(t testing.TB, c *Cluster, host string) (*exec.Cmd, kubernetes.Interface) {
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
	return fwd, kube
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
