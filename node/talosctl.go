package node

import (
	"net"
	"strconv"
	"strings"
)

// Talosctl is the talosctl command line to suggest for the node at
// endpoint (IP or IP:port; "" for the <node-ip> placeholder): --nodes and
// --endpoints both name it, as the talosconfig `talosctl gen config`
// writes has `endpoints: []` and talosctl without an endpoint fails
// ("failed to determine endpoints": pkg/machinery/client/client.go New;
// cmd/talosctl/pkg/talos/global/factory.go takes --endpoints over the
// config's). --talosconfig comes first when given. Words are quoted for a
// POSIX shell where they need it. Commands with --insecure need none of
// this: talosctl dials their --nodes directly (buildMaintenanceClient).
func Talosctl(talosconfig, endpoint string, args ...string) string {
	host, ep := "<node-ip>", "<node-ip>"
	if endpoint != "" {
		host, ep = endpoint, endpoint
		if h, p, err := net.SplitHostPort(endpoint); err == nil {
			host, ep = h, h
			if p != strconv.Itoa(DefaultPort) {
				ep = net.JoinHostPort(h, p)
			}
		}
	}
	words := []string{"talosctl"}
	if talosconfig != "" {
		words = append(words, "--talosconfig", shellWord(talosconfig))
	}
	words = append(words, "--nodes", shellWord(host), "--endpoints", shellWord(ep))
	for _, a := range args {
		words = append(words, shellWord(a))
	}
	return strings.Join(words, " ")
}
