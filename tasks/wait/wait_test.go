package wait

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
