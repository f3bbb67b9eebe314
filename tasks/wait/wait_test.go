package wait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPoll(t *testing.T) {
	n := 0
	var reports []string
	err := Poll(context.Background(), Options{Timeout: time.Minute, Interval: time.Millisecond, ReportEvery: time.Nanosecond,
		Report: func(w string) { reports = append(reports, w) }},
		func() (bool, string, error) { n++; return n == 3, "n to be 3", nil })
	if err != nil || n != 3 || len(reports) != 2 || reports[0] != "n to be 3" {
		t.Errorf("err %v, n %d, reports %v", err, n, reports)
	}
	err = Poll(context.Background(), Options{Timeout: 5 * time.Millisecond, Interval: time.Millisecond},
		func() (bool, string, error) { return false, "Godot", nil })
	if err == nil || !strings.Contains(err.Error(), "still waiting for Godot") {
		t.Errorf("timeout: %v", err)
	}
	boom := errors.New("boom")
	if err := Poll(context.Background(), Options{Timeout: time.Minute}, func() (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Errorf("check error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, Options{Timeout: time.Minute}, func() (bool, string, error) { return false, "x", nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// A check failing with what an API server restart gives (connection refused, a 503, a request timeout) is
// retried until its deadline; the error that ends the wait names the last failure.
func TestPollRetriesTransientErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, refused := net.Dial("tcp", addr)
	if refused == nil {
		t.Skip("a closed loopback port accepted a connection")
	}
	unavailable := apierrors.NewServiceUnavailable("the server is restarting")
	timeout := apierrors.NewTimeoutError("request did not complete", 1)
	steps := []error{refused, fmt.Errorf("listing nodes: %w", unavailable), timeout, nil}
	n := 0
	err = Poll(context.Background(), Options{Timeout: time.Minute, Interval: time.Millisecond}, func() (bool, string, error) {
		e := steps[n]
		n++
		return e == nil, "nodes", e
	})
	if err != nil || n != len(steps) {
		t.Fatalf("after %d checks: %v", n, err)
	}

	err = Poll(context.Background(), Options{Timeout: 20 * time.Millisecond, Interval: time.Millisecond}, func() (bool, string, error) {
		return false, "", refused
	})
	if err == nil || !strings.Contains(err.Error(), "after 20ms, still waiting") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a wait given up on a refusing server: %v", err)
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{syscall.ECONNREFUSED, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNRESET}, true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd leader changed")), true},
		{fmt.Errorf("Get \"https://10.0.0.1:6443/api/v1/nodes\": %w", context.DeadlineExceeded), true},
		{errors.New(`Get "https://cp1:6443/api": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`), true},
		{errors.New("ssh: rejected: connect failed (Connection refused)"), true},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no")), false},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "w1"), false},
		{context.Canceled, false},
		{errors.New("node w1 refused: its serving certificate names 10.0.0.9"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
