// Command pause is the Pod sandbox process: it holds the Pod's namespaces, reaps orphaned children, and exits
// on SIGINT or SIGTERM; `pause -v` prints its version and exits, as upstream's does (kubeadm's upgrade health
// check runs it so). The lab packs it as registry.k8s.io/pause, built from source instead of pulled.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (clusterctl lab)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
