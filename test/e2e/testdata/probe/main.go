// probe is the end-to-end tests' workload: a static binary packed as an image, so that tests need no
// registry. "probe serve" answers HTTP with its host name; "probe get URL" prints a URL's body;
// "probe resolve NAME" prints the addresses a name resolves to through the pod's resolver.
package main

import (
	"context"
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
		fmt.Fprintln(os.Stderr, "usage: probe serve | get URL | resolve NAME")
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
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
