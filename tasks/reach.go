package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterctl/clusterctl/transport"
)

// Listen starts a short-lived TCP listener on the host at ip:port (with socat, python3 or perl, whichever
// the host has), waits until it listens, and returns the function that stops it. The listener also ends by
// itself after a minute, so that nothing is left behind if clusterctl is killed.
func Listen(ctx context.Context, h Runner, ip string, port int) (stop func(), err error) {
	script := transport.Cmdf(`ip=%s port=%d
if command -v socat >/dev/null 2>&1; then exec timeout 60 socat -T2 "TCP-LISTEN:$port,bind=$ip,reuseaddr,fork" SYSTEM:true
elif command -v python3 >/dev/null 2>&1; then exec timeout 60 python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2]))); s.listen(64)
while True: s.accept()[0].close()' "$ip" "$port"
elif command -v perl >/dev/null 2>&1; then exec timeout 60 perl -MIO::Socket::IP -e '
$s=IO::Socket::IP->new(LocalHost=>$ARGV[0],LocalPort=>$ARGV[1],Listen=>64,ReuseAddr=>1) or die "listen: $@\n";
while($c=$s->accept){close $c}' "$ip" "$port"
else echo "no socat, python3 or perl to listen with" >&2; exit 127; fi`, ip, port)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := h.Run(lctx, script, nil)
		done <- err
	}()
	stop = func() {
		cancel()
		<-done
	}
	// Wait until the port is in LISTEN state (0A) in /proc/net/tcp{,6}.
	wait := transport.Cmdf(`p=$(printf ':%%04X' %d); for i in $(seq 50); do
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$p" '$2 ~ p"$" && $4=="0A" {f=1} END {exit !f}' && exit 0; sleep 0.1; done; exit 1`, port)
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if _, err := h.Run(waitCtx, wait, nil); err != nil {
		stop()
		select {
		case lerr := <-done:
			if lerr != nil {
				return nil, fmt.Errorf("%s: starting a test listener on %s:%d: %w", h.Name(), ip, port, lerr)
			}
		default:
		}
		return nil, fmt.Errorf("%s: the test listener on %s:%d did not start: %w", h.Name(), ip, port, err)
	}
	return stop, nil
}

// Probe connects from the host to ip:port and closes the connection at once.
func Probe(ctx context.Context, from Runner, ip string, port int) error {
	_, err := from.Run(ctx, ProbeCommand(ip, port), nil)
	if err != nil {
		return fmt.Errorf("%s cannot connect to %s:%d", from.Name(), ip, port)
	}
	return nil
}

// ProbeCommand is the command Probe runs: bash opens /dev/tcp/IP/PORT, with the address and port given as
// bash's positional arguments, never inside its script.
func ProbeCommand(ip string, port int) string {
	return transport.Cmdf(`timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe %s %d`, ip, port)
}
