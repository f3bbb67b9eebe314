// Command fanoutfloor is the floor the fan-out benchmark measures clusterctl against: the least a Go
// program can do to run one command on many hosts over SSH (dial, verify the host key, one session, read
// the output), with nothing else.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/preflight"
)

func main() {
	hostsFile := flag.String("hosts", "", "file with one address per line")
	keyFile := flag.String("key", "", "private key")
	known := flag.String("known-hosts", "", "known_hosts file")
	command := flag.String("cmd", "true", "command to run")
	limit := flag.Int("limit", 200, "hosts at once")
	printScript := flag.Bool("print-facts-script", false, "print clusterctl's facts script and exit")
	flag.Parse()
	if *printScript {
		fmt.Print(facts.FactsScript("unix:///run/containerd/containerd.sock", preflight.Asks()))
		return
	}
	if err := run(*hostsFile, *keyFile, *known, *command, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "fanoutfloor:", err)
		os.Exit(1)
	}
}

func run(hostsFile, keyFile, known, command string, limit int) error {
	f, err := os.Open(hostsFile)
	if err != nil {
		return err
	}
	var hosts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() != "" {
			hosts = append(hosts, sc.Text())
		}
	}
	f.Close()
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return err
	}
	cb, err := knownhosts.New(known)
	if err != nil {
		return err
	}
	cfg := &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: cb}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for _, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := one(net.JoinHostPort(h, "22"), cfg, command)
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				fmt.Fprintln(os.Stderr, h, err)
			}
		}()
	}
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d of %d hosts failed", failed, len(hosts))
	}
	return nil
}

func one(addr string, cfg *ssh.ClientConfig, command string) error {
	c, err := ssh.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Output(command)
	return err
}
