package node

import "strings"

// SplitHostname splits a hostname as Talos does (HostnameStatus,
// pkg/machinery/resources/network/hostname_spec.go ParseFQDN): the short
// name before the first dot, which is the node's name to Talos and to
// Kubernetes (controllers/k8s/nodename.go, unless registerWithFQDN), and
// the domain after it. The one place the short name is cut.
func SplitHostname(fqdn string) (short, domain string) {
	short, domain, _ = strings.Cut(strings.TrimSuffix(fqdn, "."), ".")
	return short, domain
}
