package pull

import (
	"errors"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// A failed request is said with its URL once: net/http's and the dialer's words are dropped.
func TestRequestError(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	if got := requestError(refused).Error(); got != "cannot connect: connection refused" {
		t.Errorf("refused: %q", got)
	}
	other := &url.Error{Op: "Get", URL: "http://x/", Err: errors.New("tls: bad certificate")}
	if got := requestError(other).Error(); got != "tls: bad certificate" {
		t.Errorf("other: %q", got)
	}
}
