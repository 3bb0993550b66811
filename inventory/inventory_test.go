package inventory

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	yaml4 "go.yaml.in/yaml/v4"

	"github.com/talosflash/talosflash/internal/testkit"
)

// The incident's class: the wrong config for the node's role is caught
// offline, as is a config whose hostname would replace the card's.
func TestConfigChecked(t *testing.T) {
	dir := testkit.WriteFiles(t, map[string]string{
		"talosflash.yaml": "nodes:\n" +
			"  - hostname: cp-1\n    role: controlplane\n    address: 10.0.0.10/24\n    config: talos/worker.yaml\n" +
			"  - hostname: worker-2\n    role: worker\n    address: 10.0.0.12/24\n    config: talos/worker.yaml\n" +
			"  - hostname: worker-3\n    role: worker\n    address: 10.0.0.13/24\n    config: talos/broken.yaml\n",
		"talos/worker.yaml": string(testkit.Testdata(t, "worker.yaml")), // sets hostname worker-1
		"talos/broken.yaml": "version: v1alpha1\nmachine: {type: worker}\n",
	})

	_, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{})
	for _, want := range []string{
		"talosflash.yaml:5: node cp-1: config " + filepath.Join(dir, "talos/worker.yaml") + " is a worker config (machine.type at " + filepath.Join(dir, "talos/worker.yaml") + ":7), the node's role is controlplane (fix: point config: at the controlplane config",
		"talosflash.yaml:9: node worker-2: config " + filepath.Join(dir, "talos/worker.yaml") + " sets hostname worker-1, which would replace worker-2",
		"talosflash.yaml:13: node worker-3: config " + filepath.Join(dir, "talos/broken.yaml") + ": invalid machine config",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}

func TestTemplate(t *testing.T) {
	inv, err := Parse(Template(), "talosflash.yaml", "", Options{SkipFiles: true})
	if err != nil {
		t.Fatalf("the starting file has problems:\n%v", err)
	}

	if inv.Cluster != "home" || len(inv.Nodes) != 3 {
		t.Fatalf("inventory %+v", inv)
	}

	want := []struct{ host, role, addr string }{
		{"cp-1", "controlplane", "192.168.1.20/24"},
		{"worker-1", "worker", "192.168.1.21/24"},
		{"worker-2", "worker", "192.168.1.22/24"},
	}
	for i, w := range want {
		n := inv.Nodes[i]
		if n.Hostname != w.host || n.Role.String() != w.role || n.Profile != w.role || n.Address.String() != w.addr ||
			n.Gateway.String() != "192.168.1.1" || len(n.DNS) != 1 || n.Interface != "end0" ||
			n.Config != filepath.Join("talos", w.role+".yaml") || n.Installer != filepath.Join("talos", "installer-"+w.role+".yaml") {
			t.Errorf("node %d: %+v", i, n)
		}
	}

	// With the files checked, each missing config names its line and the fix.
	_, err = Parse(Template(), "talosflash.yaml", "", Options{})
	if err == nil || !strings.Contains(err.Error(), "config file talos/controlplane.yaml not found") || !strings.Contains(err.Error(), "talosctl gen config") {
		t.Fatalf("missing files: %v", err)
	}
}

// good matches node/testdata's configs: cluster homelab, endpoint
// https://192.168.1.10:6443 (cp-1), each role's installer image.
const good = `cluster: homelab
gateway: 192.168.1.1
nodes:
  - hostname: cp-1
    role: controlplane
    address: 192.168.1.10/24
    config: talos/controlplane.yaml
  - hostname: worker-1
    profile: worker
    address: 192.168.1.11/24
    dns: [192.168.1.1, 1.1.1.1]
    interface: eth0
    config: talos/worker.yaml
`

func TestLoadGood(t *testing.T) {
	dir := testkit.WriteFiles(t, map[string]string{
		"talosflash.yaml":         good,
		"talos/controlplane.yaml": string(testkit.Testdata(t, "controlplane.yaml")),
		"talos/worker.yaml":       string(testkit.Testdata(t, "worker.yaml")),
	})

	inv, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}

	w := inv.Nodes[1]
	if w.Hostname != "worker-1" || w.Role != "worker" || w.Profile != "worker" || w.Interface != "eth0" || len(w.DNS) != 2 || w.Config != filepath.Join(dir, "talos/worker.yaml") || w.Line != 8 {
		t.Fatalf("worker-1 = %+v", w)
	}

}

// Each bad inventory is reported with file:line, what is wrong, and the fix.
func TestProblems(t *testing.T) {
	node := func(extra string) string {
		return "gateway: 10.0.0.1\nnodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.11/24\n" + extra
	}

	cases := []struct {
		name, yaml, want, fix string
	}{
		{"unknown role", "nodes:\n  - hostname: w1\n    role: wroker\n    address: 10.0.0.11/24\n",
			`inv.yaml:3: node w1: unknown role "wroker" (did you mean worker?)`, "use role: controlplane or role: worker"},
		{"init role", "nodes:\n  - hostname: w1\n    role: init\n    address: 10.0.0.11/24\n",
			`inv.yaml:3: node w1: unknown role "init"`, "init is deprecated"},
		{"unknown profile", "nodes:\n  - hostname: w1\n    profile: controlplan\n    address: 10.0.0.11/24\n",
			`inv.yaml:3: node w1: unknown profile "controlplan" (did you mean controlplane?)`, "define it in the profiles: file"},
		{"no role", "nodes:\n  - hostname: w1\n    address: 10.0.0.11/24\n",
			"inv.yaml:2: node w1 has no role or profile", "add role: controlplane"},
		{"duplicate hostname", node("  - hostname: w1\n    role: worker\n    address: 10.0.0.12/24\n"),
			"inv.yaml:6: hostname w1 repeats the node at line 3", "its own hostname"},
		// Talos names a node by its short hostname (the FQDN's first label,
		// hostname_spec.go ParseFQDN), Kubernetes too: w1 and w1.home.arpa
		// would be one Kubernetes node (the rollout drained the other).
		{"same short hostname", node("  - hostname: w1.home.arpa\n    role: controlplane\n    address: 10.0.0.12/24\n"),
			"inv.yaml:6: hostname w1.home.arpa is node w1 to Talos and Kubernetes (its short name), as the node at line 3", "its own hostname"},
		{"same short hostname, two domains", "gateway: 10.0.0.1\nnodes:\n  - hostname: cp-1.a.lan\n    role: worker\n    address: 10.0.0.11/24\n  - hostname: cp-1.b.lan\n    role: worker\n    address: 10.0.0.12/24\n",
			"inv.yaml:6: hostname cp-1.b.lan is node cp-1 to Talos and Kubernetes (its short name), as the node at line 3", "its own hostname"},
		{"capital hostname", "nodes:\n  - hostname: Worker-1\n    role: worker\n    address: 10.0.0.11/24\n",
			`inv.yaml:2: hostname "Worker-1": contains the capital 'W'`, "lowercase"},
		{"duplicate address", node("  - hostname: w2\n    role: worker\n    address: 10.0.0.11/25\n"),
			"inv.yaml:6: address 10.0.0.11 of w2 is also w1's (line 3)", "its own address"},
		{"gateway outside", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.1.11/24\n    gateway: 10.0.0.1\n",
			"inv.yaml:5: node w1: gateway 10.0.0.1 is outside the address's subnet 10.0.1.0/24", "inside 10.0.1.0/24"},
		{"default gateway outside", "gateway: 10.0.0.1\nnodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.1.11/24\n",
			"inv.yaml:1: node w1: gateway 10.0.0.1 is outside", "prefix length"},
		{"gateway is self", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.1/24\n    gateway: 10.0.0.1\n",
			"is the node's own address", "router's address"},
		{"bad CIDR", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.300/24\n",
			`inv.yaml:4: address "10.0.0.300/24" is not a valid CIDR address`, "192.168.1.21/24"},
		{"no prefix", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.11\n",
			`inv.yaml:4: address "10.0.0.11" has no prefix length`, "10.0.0.11/24"},
		{"network address", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.0/24\n",
			"network address", "host address"},
		{"missing config", node("    config: talos/nope.yaml\n"),
			"inv.yaml:6: config file talos/nope.yaml not found", "talosctl gen config"},
		{"missing installer", node("    installer: talos/installer-worker.yaml\n"),
			"inv.yaml:6: installer file talos/installer-worker.yaml not found", "schematic"},
		{"unknown field", node("    adress: 10.0.0.1/24\n"),
			`inv.yaml:6: unknown field "adress" in a node`, "did you mean address?"},
		{"unknown top field", "clutser: x\n" + node(""),
			`inv.yaml:1: unknown field "clutser" in the inventory`, "did you mean cluster?"},
		{"bad hostname", "nodes:\n  - hostname: worker_1\n    role: worker\n    address: 10.0.0.11/24\n",
			`inv.yaml:2: hostname "worker_1": contains '_'`, "lowercase letters"},
		{"bad dns", node("    dns: [10.0.0.1/24]\n"),
			`inv.yaml:6: dns "10.0.0.1/24" is not an IP address`, "without /prefix"},
		{"syntax", "nodes:\n  - hostname: w1\n    role: [worker\n    address: 10.0.0.11/24\n",
			"did not find expected ',' or ']'", "YAML syntax"},
		{"empty", "", "inv.yaml: the file is empty", "inventory init"},
		{"empty address", "nodes:\n  - hostname: w1\n    role: worker\n    address:\n", "inv.yaml:4: node w1 has no address", "prefix length"},
		{"empty role", "nodes:\n  - hostname: w1\n    role: \"\"\n    address: 10.0.0.11/24\n", "node w1 has no role or profile", "role: worker"},
		{"empty hostname", "nodes:\n  - hostname:\n    role: worker\n    address: 10.0.0.11/24\n", "inv.yaml:2: a node has no hostname", "worker-1"},
		{"no nodes", "cluster: x\n", "inv.yaml:1: no nodes", "add nodes:"},
		{"bad version", "talosVersion: 1.14\n" + node(""), "inv.yaml:1: talosVersion", "v1.14.0"},
		// issue 27: values no node can use, refused with file:line and the fix
		{"address /0", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.11/0\n", "inv.yaml:4: address 10.0.0.11/0 has the prefix length /0", "e.g. /24"},
		{"address ipv6 /0", "nodes:\n  - hostname: w1\n    role: worker\n    address: 2001:db8::11/0\n", "inv.yaml:4: address 2001:db8::11/0 has the prefix length /0", "e.g. /24"},
		{"address broadcast /32", "nodes:\n  - hostname: w1\n    role: worker\n    address: 255.255.255.255/32\n", "inv.yaml:4: address 255.255.255.255/32 cannot be a node's", "unicast"},
		{"address broadcast", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.255/24\n", "inv.yaml:4: address 10.0.0.255/24 is the subnet's broadcast address", "host address"},
		{"dns 0.0.0.0", node("    dns: [0.0.0.0]\n"), "inv.yaml:6: dns 0.0.0.0 is the unspecified address", "unicast"},
		{"dns ::", node("    dns: ['::']\n"), "inv.yaml:6: dns :: is the unspecified address", "unicast"},
		{"dns multicast", node("    dns: [224.0.0.251]\n"), "inv.yaml:6: dns 224.0.0.251 is a multicast address", "unicast"},
		{"dns ipv6 multicast", node("    dns: ['ff02::fb']\n"), "inv.yaml:6: dns ff02::fb is a multicast address", "unicast"},
		{"dns broadcast", node("    dns: [255.255.255.255]\n"), "inv.yaml:6: dns 255.255.255.255 is the broadcast address", "unicast"},
		{"dns twice", node("    dns: [192.168.1.1, 192.168.1.1]\n"), "inv.yaml:6: dns: 192.168.1.1 is listed twice", "list each server once"},
		{"dns zone", node("    dns: ['fe80::1%eth0']\n"), "inv.yaml:6: dns fe80::1%eth0 has a zone (%eth0)", "unicast"},
		{"default dns zone", "dns: ['fe80::1%end0']\n" + node(""), "inv.yaml:1: dns fe80::1%end0 has a zone", "unicast"},
		{"too many dns", node("    dns: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]\n"), "inv.yaml:6: dns: 4 servers, at most 3", "keep the first 3"},
		{"gateway multicast", node("    gateway: 224.0.0.1\n"), "inv.yaml:6: gateway 224.0.0.1 is a multicast address", "router's own unicast address"},
		{"gateway zone", "nodes:\n  - hostname: w1\n    role: worker\n    address: 2001:db8::11/64\n    gateway: 'fe80::1%end0'\n", "inv.yaml:5: gateway fe80::1%end0 has a zone", "unicast"},
		{"gateway network", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.11/24\n    gateway: 10.0.0.0\n", "inv.yaml:5: node w1: gateway 10.0.0.0 is the subnet 10.0.0.0/24's network address", "inside the subnet"},
		{"gateway broadcast", "nodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.11/24\n    gateway: 10.0.0.255\n", "inv.yaml:5: node w1: gateway 10.0.0.255 is the subnet 10.0.0.0/24's broadcast address", "inside the subnet"},
		{"default gateway broadcast", "gateway: 10.0.0.255\nnodes:\n  - hostname: w1\n    role: worker\n    address: 10.0.0.11/24\n", "inv.yaml:1: node w1: gateway 10.0.0.255 is the subnet 10.0.0.0/24's broadcast address", "inside the subnet"},
		{"interface ...", node("    interface: '...'\n"), `inv.yaml:6: interface "..." is not a Linux interface name`, "end0"},
		{"interface -", node("    interface: '-'\n"), `inv.yaml:6: interface "-" is not a Linux interface name`, "end0"},
		{"interface .", node("    interface: '.'\n"), `inv.yaml:6: interface "." is not a Linux interface name`, "end0"},
		{"interface ESC", node("    interface: \"end\\e[2J\"\n"), `inv.yaml:6: interface "end\x1b[2J" is not a Linux interface name`, "end0"},
		{"interface NUL", node("    interface: \"end\\0\"\n"), `inv.yaml:6: interface "end\x00" is not a Linux interface name`, "end0"},
		{"interface non-ASCII", node("    interface: énd0\n"), `inv.yaml:6: interface "énd0" is not a Linux interface name`, "end0"},
		{"interface bidi", node("    interface: \"end\\u202e0\"\n"), `inv.yaml:6: interface "end\u202e0" is not a Linux interface name`, "end0"},
		{"interface too long", node("    interface: abcdefghijklmnop\n"), `inv.yaml:6: interface "abcdefghijklmnop" is not a Linux interface name: 16 bytes`, "end0"},
		{"default interface slash", "interface: en/d0\n" + node(""), `inv.yaml:1: interface "en/d0" is not a Linux interface name`, "end0"},
		// IPv4-mapped IPv6 (::ffff:a.b.c.d) is never an address on a wire
		// (RFC 4291 2.5.5.2): ::ffff:0.0.0.0 and ::ffff:255.255.255.255
		// passed as DNS servers, a mapped address and gateway as a node's.
		{"dns mapped unspecified", node("    dns: ['::ffff:0.0.0.0']\n"), "inv.yaml:6: dns ::ffff:0.0.0.0 is an IPv4-mapped IPv6 address", "own unicast IPv4 address"},
		{"dns mapped broadcast", node("    dns: ['::ffff:255.255.255.255']\n"), "inv.yaml:6: dns ::ffff:255.255.255.255 is an IPv4-mapped IPv6 address", "own unicast IPv4 address"},
		{"dns mapped", node("    dns: ['::ffff:10.0.0.1']\n"), "inv.yaml:6: dns ::ffff:10.0.0.1 is an IPv4-mapped IPv6 address", "write the IPv4 address 10.0.0.1"},
		{"gateway mapped", "nodes:\n  - hostname: w1\n    role: worker\n    address: '::ffff:10.0.0.11/120'\n    gateway: '::ffff:10.0.0.1'\n", "inv.yaml:5: gateway ::ffff:10.0.0.1 is an IPv4-mapped IPv6 address", "10.0.0.1"},
		{"address mapped", "nodes:\n  - hostname: w1\n    role: worker\n    address: '::ffff:10.0.0.11/120'\n", "inv.yaml:4: address ::ffff:10.0.0.11/120 is an IPv4-mapped IPv6 address", "write the IPv4 address 10.0.0.11 with its prefix length"},
		{"address mapped unspecified", "nodes:\n  - hostname: w1\n    role: worker\n    address: '::ffff:0.0.0.0/96'\n", "inv.yaml:4: address ::ffff:0.0.0.0/96 is an IPv4-mapped IPv6 address", "IPv4"},
		{"duplicate hostname, other case", node("  - hostname: W1\n    role: worker\n    address: 10.0.0.12/24\n"),
			"inv.yaml:6: hostname W1 repeats the node at line 3", "its own hostname"},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "inv.yaml", "", Options{})
			if err == nil {
				t.Fatal("accepted")
			}

			ps, ok := err.(Problems)
			if !ok {
				t.Fatalf("error %T, want Problems", err)
			}

			var hit *Problem
			for i := range ps {
				if strings.Contains(ps[i].Error(), c.want) {
					hit = &ps[i]
				}
			}

			if hit == nil || !strings.Contains(hit.Fix, c.fix) {
				t.Fatalf("problems:\n%v\nwant one containing %q with fix containing %q", err, c.want, c.fix)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	_, err := Parse([]byte("nodes:\n  - hostname: a\n    role: wroker\n    address: 1.2.3.4\n  - hostname: a\n    role: worker\n    address: 10.0.0.1/8\n"), "x.yaml", "", Options{})
	if ps, _ := err.(Problems); len(ps) != 3 {
		t.Fatalf("want 3 problems, got:\n%v", err)
	}
}

// Talos's own type (machinery's network.PlatformConfigSpec, decoded with
// the YAML library Talos's metal platform uses, unknown fields refused)
// reads the value back with every field as meant.
func TestNetworkConfigDecodesAsTalos(t *testing.T) {
	n := Node{
		Hostname:  "worker-1",
		Address:   netip.MustParsePrefix("192.168.1.21/24"),
		Gateway:   netip.MustParseAddr("192.168.1.1"),
		DNS:       []netip.Addr{netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("1.1.1.1")},
		Interface: "end0",
	}

	b, err := n.NetworkConfig()
	if err != nil {
		t.Fatal(err)
	}

	var spec network.PlatformConfigSpec

	dec := yaml4.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)

	if err := dec.Decode(&spec); err != nil {
		t.Fatalf("Talos's type refuses it: %v\n%s", err, b)
	}

	if len(spec.Addresses) != 1 || len(spec.Links) != 1 || len(spec.Routes) != 1 || len(spec.Hostnames) != 1 || len(spec.Resolvers) != 1 {
		t.Fatalf("sections: %+v", spec)
	}

	a := spec.Addresses[0]
	if a.Address != n.Address || a.LinkName != "end0" || a.Family.String() != "inet4" || a.Scope.String() != "global" ||
		a.Flags.String() != "permanent" || a.ConfigLayer != network.ConfigPlatform {
		t.Errorf("address %+v", a)
	}

	if l := spec.Links[0]; l.Name != "end0" || !l.Up || l.ConfigLayer != network.ConfigPlatform || l.Logical {
		t.Errorf("link %+v", l)
	}

	r := spec.Routes[0]
	if r.Gateway != n.Gateway || r.Destination.IsValid() || r.OutLinkName != "end0" || r.Family.String() != "inet4" ||
		r.Table.String() != "main" || r.Type.String() != "unicast" || r.Protocol.String() != "static" ||
		r.Scope.String() != "global" || r.Priority != 1024 || r.ConfigLayer != network.ConfigPlatform {
		t.Errorf("route %+v", r)
	}

	h := spec.Hostnames[0]
	if h.Hostname != "worker-1" || h.Domainname != "" || h.ConfigLayer != network.ConfigPlatform {
		t.Errorf("hostname %+v", h)
	}

	if err := h.Validate(); err != nil {
		t.Errorf("Talos refuses the hostname: %v", err)
	}

	if rs := spec.Resolvers[0]; len(rs.DNSServers) != 2 || rs.DNSServers[1] != n.DNS[1] || rs.ConfigLayer != network.ConfigPlatform {
		t.Errorf("resolvers %+v", rs)
	}

	// And back: what `talosflash card` shows.
	info, err := ParseNetworkConfig(b)
	if err != nil {
		t.Fatal(err)
	}

	if info.String() != "worker-1, 192.168.1.21/24" || info.Gateway != n.Gateway || info.Interface != "end0" || len(info.DNS) != 2 {
		t.Fatalf("card info %+v", info)
	}
}

func TestNetworkConfigIPv6AndFQDN(t *testing.T) {
	n := Node{Hostname: "cp-1.lab.example", Address: netip.MustParsePrefix("fd00::10/64"), Gateway: netip.MustParseAddr("fd00::1"), Interface: "end0"}

	b, err := n.NetworkConfig()
	if err != nil {
		t.Fatal(err)
	}

	var spec network.PlatformConfigSpec
	if err := yaml4.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}

	if spec.Addresses[0].Family.String() != "inet6" || spec.Routes[0].Family.String() != "inet6" || spec.Hostnames[0].Hostname != "cp-1" || spec.Hostnames[0].Domainname != "lab.example" || len(spec.Resolvers) != 0 {
		t.Fatalf("%+v\n%s", spec, b)
	}
}

// The inventory names the machine configs; nothing of them is read into
// the META value or the problems.
func TestNothingSecret(t *testing.T) {
	secret := "key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd0JDSUVJSA=="
	dir := testkit.WriteFiles(t, map[string]string{
		"talosflash.yaml":         good + "    installer: nope.yaml\n",
		"talos/controlplane.yaml": secret,
		"talos/worker.yaml":       secret,
	})

	inv, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{})
	if err == nil {
		t.Fatal("missing installer accepted")
	}

	var out bytes.Buffer
	out.WriteString(err.Error())

	for _, n := range inv.Nodes {
		b, err := n.NetworkConfig()
		if err != nil {
			t.Fatal(err)
		}

		out.Write(b)
	}

	for i := 0; i+12 <= len(secret); i++ {
		if strings.Contains(out.String(), secret[i:i+12]) {
			t.Fatalf("secret fragment %q in output", secret[i:i+12])
		}
	}
}

// A custom profile picks the image; the role the Talos machine type.
func TestCustomProfile(t *testing.T) {
	dir := testkit.WriteFiles(t, map[string]string{
		"profiles.yaml": "profiles:\n  - name: storage\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/iscsi-tools]\n",
		"talosflash.yaml": "profiles: profiles.yaml\nnodes:\n" +
			"  - hostname: s1\n    role: worker\n    profile: storage\n    address: 10.0.0.30/24\n" +
			"  - hostname: s2\n    profile: storage\n    address: 10.0.0.31/24\n" +
			"  - hostname: w1\n    profile: worker\n    address: 10.0.0.32/24\n",
	})

	inv, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}

	got := []string{}
	for _, n := range inv.Nodes {
		got = append(got, n.Hostname+":"+string(n.Role)+":"+n.Profile)
	}

	if strings.Join(got, " ") != "s1:worker:storage s2::storage w1:worker:worker" {
		t.Fatalf("nodes %v", got)
	}

	// Without the profiles file, storage is unknown.
	_, err = Parse([]byte("nodes:\n  - hostname: s1\n    profile: storage\n    address: 10.0.0.30/24\n"), "x.yaml", "", Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown profile "storage"`) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add(Template())
	f.Add([]byte("nodes:\n  - hostname: a\n    role: worker\n    address: ::1/128\n    gateway: ::2\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := Parse(data, "f.yaml", "", Options{SkipFiles: true})
		if inv == nil {
			t.Fatal("nil inventory")
		}

		if err != nil {
			ps, ok := err.(Problems)
			if !ok || len(ps) == 0 {
				t.Fatalf("error %T %v", err, err)
			}

			return
		}

		for _, n := range inv.Nodes {
			b, err := n.NetworkConfig()
			if err != nil {
				t.Fatalf("valid node %+v: %v", n, err)
			}

			var spec network.PlatformConfigSpec
			if err := yaml4.Unmarshal(b, &spec); err != nil {
				t.Fatalf("Talos cannot read %s: %v", b, err)
			}

			if spec.Hostnames[0].Validate() != nil {
				t.Fatalf("Talos refuses hostname %q", n.Hostname)
			}
		}
	})
}
