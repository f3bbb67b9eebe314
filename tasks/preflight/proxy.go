package preflight

import (
	"fmt"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/facts"
)

// The HTTPProxy checks, as kubeadm's: a proxy the API server or the cluster's ranges would be reached
// through.

func checkHTTPProxy(f *facts.Facts, n *Node) ([]string, []string) {
	if proxy := httpsProxy(f); proxy != "" && !noProxyCovers(f, n.APIHost) {
		return []string{fmt.Sprintf("Connection to %q uses proxy %q. If that is not intended, adjust your proxy settings", "https://"+n.APIHost, proxy)}, nil
	}
	return nil, nil
}

func checkHTTPProxyCIDR(f *facts.Facts, n *Node) ([]string, []string) {
	proxy := httpsProxy(f)
	if proxy == "" {
		return nil, nil
	}
	var warnings []string
	for _, cidr := range []string{n.ServiceSubnet, n.PodSubnet} {
		if cidr != "" && !noProxyCovers(f, cidr) {
			warnings = append(warnings, fmt.Sprintf("connection to %q uses proxy %q. This may lead to malfunctional cluster setup. Make sure that Pod and Services IP ranges specified correctly as exceptions in proxy configuration", cidr, proxy))
		}
	}
	return warnings, nil
}

func httpsProxy(f *facts.Facts) string {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if v := f.Proxy[k]; v != "" {
			return v
		}
	}
	return ""
}

func noProxyCovers(f *facts.Facts, what string) bool {
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		for _, entry := range strings.Split(f.Proxy[k], ",") {
			if e := strings.TrimSpace(entry); e != "" && (e == what || e == "*" || strings.HasSuffix(what, strings.TrimPrefix(e, "*"))) {
				return true
			}
		}
	}
	return false
}
