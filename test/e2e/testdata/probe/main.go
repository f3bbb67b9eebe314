// probe is the end-to-end tests' workload: a static binary packed as an image, so that tests need no
// registry. "probe serve" answers HTTP with its host name; "probe get URL" prints a URL's body;
// "probe resolve NAME" prints the addresses a name resolves to through the pod's resolver; "probe api
// INTERVAL SERVICE LOG" is a client of the API server with the Pod's service-account token, and of a
// workload's Service, that logs every request's outcome.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve | get URL | resolve NAME | api INTERVAL SERVICE LOG")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		name, _ := os.Hostname()
		fmt.Println("serving on :8080 as", name)
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Println("request from", r.RemoteAddr)
			fmt.Fprint(w, name)
		})
		fmt.Fprintln(os.Stderr, http.ListenAndServe(":8080", nil))
		os.Exit(1)
	case "get":
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(strings.TrimSpace(string(body)))
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

// apiClient behaves as a client-go program in a Pod does: it reads the CA data once, at start, and its token
// file again every minute; every interval it asks the API server (through the kubernetes Service) who it is
// (a SelfSubjectReview: the token must be accepted) and GETs the workload Service named service (found
// through the Service environment variables). Each outcome is a line appended to log:
// "TIME ok" or "TIME fail api|web: error".
func apiClient(interval time.Duration, service, log string) int {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	caPEM, err := os.ReadFile(sa + "ca.crt")
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
	api := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	web := &http.Client{Timeout: 5 * time.Second}
	apiURL := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/apis/authentication.k8s.io/v1/selfsubjectreviews"
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
		outcome := "ok"
		req, _ := http.NewRequest(http.MethodPost, apiURL, strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := api.Do(req); err != nil {
			outcome = "fail api: " + err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), "system:serviceaccount:") {
				outcome = fmt.Sprintf("fail api: %s %s", resp.Status, strings.TrimSpace(string(body)))
			}
		}
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
		line := time.Now().UTC().Format("15:04:05.000") + " " + strings.ReplaceAll(outcome, "\n", " ") + "\n"
		out.WriteString(line)
		if outcome != "ok" {
			fmt.Print(line)
		}
		time.Sleep(interval)
	}
}
