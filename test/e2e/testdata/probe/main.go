// probe is the end-to-end tests' workload: a static binary packed as an image, so that tests need no
// registry. "probe serve" answers HTTP with its host name, and UDP datagrams on the same port with its
// host name too; "probe get URL [TIMEOUT]" prints a URL's body (5 s at most by default); "probe udp HOST:PORT" prints the answer to a datagram;
// "probe fetch URL" reads a URL's body to the end and prints its size and time (with serve's /bytes/N, N
// bytes: a TCP throughput measure); "probe conns HOST:PORT N" makes N short connections one after another
// (connect, an HTTP/1.0 request, the answer read, close) and prints the connect and request times'
// percentiles and the connections per second; "probe reach HOST:PORT DURATION INTERVAL" asks over UDP every INTERVAL for DURATION and prints how many were answered and the longest time without an answer; "probe resolve NAME" prints the addresses a name resolves to through the pod's resolver; "probe api
// INTERVAL SERVICE LOG" is a client of the API server with the Pod's service-account token, and of a
// workload's Service, that logs every request's outcome.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve | get URL | fetch URL | udp HOST:PORT | resolve NAME | api INTERVAL SERVICE LOG")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "get":
		get()
	case "fetch":
		if err := fetch(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "conns":
		n, err := strconv.Atoi(os.Args[3])
		if err == nil {
			err = conns(os.Args[2], n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "udp":
		if err := askUDP(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "reach":
		d, err := time.ParseDuration(os.Args[3])
		every, err2 := time.ParseDuration(os.Args[4])
		if err != nil || err2 != nil || every <= 0 {
			fmt.Fprintln(os.Stderr, "usage: probe reach HOST:PORT DURATION INTERVAL")
			os.Exit(2)
		}
		fmt.Println(reach(os.Args[2], d, every))
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(strings.Join(addrs, " "))
	case "api":
		interval, err := time.ParseDuration(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(apiClient(interval, os.Args[3], os.Args[4]))
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

// serve answers HTTP on :8080 with the Pod's name (and UDP beside it), draining on SIGTERM.
func serve() {
	name, _ := os.Hostname()
	fmt.Println("serving on :8080 as", name)
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("request from", r.RemoteAddr)
		fmt.Fprint(w, name)
	})
	http.HandleFunc("/bytes/{n}", serveBytes)
	// As a well-behaved workload does: on SIGTERM it keeps serving while its endpoint is removed
	// everywhere (5 s), then finishes the requests it has.
	go serveUDP(name)
	srv := &http.Server{Addr: ":8080"}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		time.Sleep(5 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// get prints the body of GET URL [TIMEOUT].
func get() {
	c := http.Client{Timeout: 5 * time.Second}
	if len(os.Args) > 3 { // get URL TIMEOUT
		d, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c.Timeout = d
	}
	resp, err := c.Get(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(strings.TrimSpace(string(body)))
}

// apiClient behaves as a client-go program in a Pod does: it reads the CA data once, at start, and its token
// file again every minute; every interval it GETs, from the API server (through the kubernetes Service), the
// kube-root-ca.crt ConfigMap of its namespace (the token must be accepted), and GETs the workload Service
// named service (found through the Service environment variables). As client-go does for GETs, a request
// whose connection was reset or closed by a server going away is retried (up to 3 times), and a 429 with
// Retry-After (a server shutting down) is retried after the time it asks. Each outcome is a line appended
// to log: "TIME ok", "TIME retried: error" (then the outcome of the retry) or "TIME fail api|web: error".
func apiClient(interval time.Duration, service, log string) int {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	caPEM, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ns, err := os.ReadFile(sa + "namespace")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	out, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	write := func(line string) {
		line = time.Now().UTC().Format("15:04:05.000") + " " + strings.ReplaceAll(line, "\n", " ") + "\n"
		out.WriteString(line)
		if !strings.HasSuffix(line, " ok\n") {
			fmt.Print(line)
		}
	}
	// 15 s, as the node-local proxy client's in the e2e tests: lab hosts share one disk and two cores, and an
	// API server stalled ~10 s by that load (haproxy's own checks timing out) is not a failure of a roll.
	api := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	web := &http.Client{Timeout: 5 * time.Second}
	apiURL := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/api/v1/namespaces/" + strings.TrimSpace(string(ns)) + "/configmaps/kube-root-ca.crt"
	env := strings.ToUpper(strings.ReplaceAll(service, "-", "_"))
	webURL := "http://" + net.JoinHostPort(os.Getenv(env+"_SERVICE_HOST"), os.Getenv(env+"_SERVICE_PORT")) + "/"
	var token []byte
	var read time.Time
	for {
		if time.Since(read) >= time.Minute {
			if t, err := os.ReadFile(sa + "token"); err == nil {
				token, read = t, time.Now()
			}
		}
		outcome := askAPI(api, apiURL, token, write)
		if outcome == "ok" {
			if resp, err := web.Get(webURL); err != nil {
				outcome = "fail web: " + err.Error()
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					outcome = "fail web: " + resp.Status
				}
			}
		}
		write(outcome)
		time.Sleep(interval)
	}
}

// askAPI reads the kube-root-ca.crt ConfigMap as the Pod's service account, retrying a reset connection or
// a 429 up to three times; "ok", or what failed.
func askAPI(api *http.Client, apiURL string, token []byte, write func(string)) string {
	outcome := "ok"
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest(http.MethodGet, apiURL, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := api.Do(req)
		if err != nil {
			if attempt <= 3 && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				write("retried: " + err.Error())
				continue
			}
			outcome = "fail api: " + err.Error()
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && attempt <= 3 {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			write(fmt.Sprintf("retried: %s, Retry-After %ds", resp.Status, wait))
			time.Sleep(time.Duration(wait) * time.Second)
			continue
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "BEGIN CERTIFICATE") {
			outcome = fmt.Sprintf("fail api: %s %s", resp.Status, strings.TrimSpace(string(body)))
		}
		break
	}
	return outcome
}

// serveUDP answers every datagram on :8080/udp with name.
func serveUDP(name string) {
	pc, err := net.ListenPacket("udp", ":8080")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 1500)
	for {
		_, addr, err := pc.ReadFrom(buf)
		if err != nil {
			continue
		}
		_, _ = pc.WriteTo([]byte(name), addr)
	}
}

// askUDP sends a datagram to addr and prints the answer, trying three times, 2 s each.
func askUDP(addr string) error {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := make([]byte, 1500)
	for range 3 {
		if _, err := conn.Write([]byte("ping")); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := conn.Read(buf)
		if err == nil {
			fmt.Print(string(buf[:n]))
			return nil
		}
	}
	return fmt.Errorf("no answer from %s over UDP", addr)
}

// reach sends a datagram to addr every interval for d, each waited for an interval, and says how many were
// answered, the longest run without an answer (from the first unanswered datagram's sending to the next
// answered one's) and whether the last was answered.
func reach(addr string, d, interval time.Duration) string {
	buf := make([]byte, 1500)
	var sent, answered int
	var longest time.Duration
	var downSince time.Time
	last := false
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		sent++
		last = false
		if conn, err := net.Dial("udp", addr); err == nil {
			if _, err := conn.Write([]byte("ping")); err == nil {
				_ = conn.SetReadDeadline(start.Add(interval))
				_, err = conn.Read(buf)
				last = err == nil
			}
			conn.Close()
		}
		switch {
		case last:
			answered++
			if !downSince.IsZero() {
				longest = max(longest, start.Sub(downSince))
				downSince = time.Time{}
			}
		case downSince.IsZero():
			downSince = start
		}
		time.Sleep(time.Until(start.Add(interval)))
	}
	if !downSince.IsZero() {
		longest = max(longest, time.Since(downSince))
	}
	return fmt.Sprintf("answered %d of %d, longest outage %dms, last answered %v", answered, sent, longest.Milliseconds(), last)
}

// serveBytes answers with the number of zero bytes the path names (at most 16 GiB).
func serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 || n > 16<<30 {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

// fetch reads url's body to the end (60 s at most) and prints "BYTES bytes in SECONDS s", timed from the
// request to the last byte.
func fetch(url string) error {
	c := http.Client{Timeout: 60 * time.Second}
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	fmt.Printf("%d bytes in %.6f s\n", n, time.Since(start).Seconds())
	return nil
}

// conns makes n short connections to addr, one after another, and prints the percentiles (50, 90, 99) of
// the time to connect and of the whole request, in microseconds, and the connections per second.
func conns(addr string, n int) error {
	connect, whole := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t0 := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		t1 := time.Now()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			c.Close()
			return err
		}
		if _, err := io.Copy(io.Discard, c); err != nil {
			c.Close()
			return err
		}
		c.Close()
		connect, whole = append(connect, t1.Sub(t0)), append(whole, time.Since(t0))
	}
	elapsed := time.Since(start)
	pct := func(d []time.Duration, p int) int64 {
		slices.Sort(d)
		return d[(len(d)-1)*p/100].Microseconds()
	}
	fmt.Printf("connect_us p50=%d p90=%d p99=%d request_us p50=%d p90=%d p99=%d conns_per_s=%.0f\n",
		pct(connect, 50), pct(connect, 90), pct(connect, 99), pct(whole, 50), pct(whole, 90), pct(whole, 99), float64(n)/elapsed.Seconds())
	return nil
}
