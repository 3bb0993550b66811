package inventory

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/internal/yamlwords"
	"github.com/talosflash/talosflash/node"
)

// The YAML shapes of Talos's PlatformNetworkConfig (pkg/machinery/resources/
// network PlatformConfigSpec and the *SpecSpec types it lists), only the
// fields talosflash sets. Talos decodes the META value into its own type.
type (
	platformConfig struct {
		Addresses []addressSpec  `yaml:"addresses"`
		Links     []linkSpec     `yaml:"links"`
		Routes    []routeSpec    `yaml:"routes"`
		Hostnames []hostnameSpec `yaml:"hostnames"`
		Resolvers []resolverSpec `yaml:"resolvers"`
	}
	addressSpec struct {
		Address  string `yaml:"address"`
		LinkName string `yaml:"linkName"`
		Family   string `yaml:"family"`
		Scope    string `yaml:"scope"`
		Flags    string `yaml:"flags"`
		Layer    string `yaml:"layer"`
	}
	linkSpec struct {
		Name  string `yaml:"name"`
		Up    bool   `yaml:"up"`
		Layer string `yaml:"layer"`
	}
	routeSpec struct {
		Family      string `yaml:"family"`
		Gateway     string `yaml:"gateway"`
		OutLinkName string `yaml:"outLinkName"`
		Table       string `yaml:"table"`
		Priority    uint32 `yaml:"priority"`
		Scope       string `yaml:"scope"`
		Type        string `yaml:"type"`
		Protocol    string `yaml:"protocol"`
		Layer       string `yaml:"layer"`
	}
	hostnameSpec struct {
		Hostname   string `yaml:"hostname"`
		Domainname string `yaml:"domainname,omitempty"`
		Layer      string `yaml:"layer"`
	}
	resolverSpec struct {
		DNSServers []string `yaml:"dnsServers"`
		Layer      string   `yaml:"layer"`
	}
)

const layerPlatform = "platform"

// defaultRoutePriority is Talos's metric for a default route it configures
// (the docs' examples use 1024 for IPv4).
const defaultRoutePriority = 1024

// NetworkConfig is the node's META 0x0a value: a PlatformNetworkConfig
// YAML with its address on its interface, the link up (which also turns
// off DHCP on it), the default route via the gateway (if any), its
// hostname and resolvers. Nothing else of the node goes in.
func (n Node) NetworkConfig() ([]byte, error) {
	if !n.Address.IsValid() {
		return nil, errors.New("node has no address")
	}

	if n.Hostname == "" {
		return nil, errors.New("node has no hostname")
	}

	iface := n.Interface
	if iface == "" {
		iface = DefaultInterface
	}

	family := "inet4"
	if n.Address.Addr().Is6() {
		family = "inet6"
	}

	cfg := platformConfig{
		Addresses: []addressSpec{{
			Address: n.Address.String(), LinkName: iface, Family: family,
			Scope: "global", Flags: "permanent", Layer: layerPlatform,
		}},
		Links: []linkSpec{{Name: iface, Up: true, Layer: layerPlatform}},
	}

	if n.Gateway.IsValid() {
		cfg.Routes = []routeSpec{{
			Family: family, Gateway: n.Gateway.String(), OutLinkName: iface,
			Table: "main", Priority: defaultRoutePriority, Scope: "global",
			Type: "unicast", Protocol: "static", Layer: layerPlatform,
		}}
	}

	host, domain := node.SplitHostname(n.Hostname)
	cfg.Hostnames = []hostnameSpec{{Hostname: host, Domainname: domain, Layer: layerPlatform}}

	if len(n.DNS) > 0 {
		servers := make([]string, len(n.DNS))
		for i, a := range n.DNS {
			servers[i] = a.String()
		}

		cfg.Resolvers = []resolverSpec{{DNSServers: servers, Layer: layerPlatform}}
	}

	return yaml.Marshal(cfg)
}

// CardInfo is what a card's META 0x0a says about its node.
type CardInfo struct {
	Hostname  string
	Address   netip.Prefix
	Interface string
	Gateway   netip.Addr
	DNS       []netip.Addr
}

// String is "worker-1, 192.168.1.21/24".
func (c CardInfo) String() string {
	var parts []string
	if c.Hostname != "" {
		parts = append(parts, c.Hostname)
	}

	if c.Address.IsValid() {
		parts = append(parts, c.Address.String())
	}

	return strings.Join(parts, ", ")
}

// ParseNetworkConfig reads a META 0x0a value (any PlatformNetworkConfig,
// not only talosflash's) for what identifies the node: the first hostname,
// the first global address and its link, the default gateway, the DNS
// servers. Talos decodes the value leniently; so does this.
func ParseNetworkConfig(b []byte) (CardInfo, error) {
	var cfg struct {
		Addresses []struct {
			Address  string `yaml:"address"`
			LinkName string `yaml:"linkName"`
		} `yaml:"addresses"`
		Routes []struct {
			Dst     string `yaml:"dst"`
			Gateway string `yaml:"gateway"`
		} `yaml:"routes"`
		Hostnames []struct {
			Hostname   string `yaml:"hostname"`
			Domainname string `yaml:"domainname"`
		} `yaml:"hostnames"`
		Resolvers []struct {
			DNSServers []string `yaml:"dnsServers"`
		} `yaml:"resolvers"`
	}

	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return CardInfo{}, fmt.Errorf("META network config (key 0x0a): %w", yamlwords.Explain(err))
	}

	var info CardInfo

	if len(cfg.Hostnames) > 0 {
		info.Hostname = cfg.Hostnames[0].Hostname
		if d := cfg.Hostnames[0].Domainname; d != "" {
			info.Hostname += "." + d
		}
	}

	for _, a := range cfg.Addresses {
		if p, err := netip.ParsePrefix(a.Address); err == nil {
			info.Address, info.Interface = p, a.LinkName
			break
		}
	}

	for _, r := range cfg.Routes {
		if r.Dst != "" && r.Dst != "0.0.0.0/0" && r.Dst != "::/0" {
			continue
		}

		if g, err := netip.ParseAddr(r.Gateway); err == nil {
			info.Gateway = g
			break
		}
	}

	for _, r := range cfg.Resolvers {
		for _, s := range r.DNSServers {
			if a, err := netip.ParseAddr(s); err == nil {
				info.DNS = append(info.DNS, a)
			}
		}
	}

	return info, nil
}
