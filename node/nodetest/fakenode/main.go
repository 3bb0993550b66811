// Command fakenode runs fake Talos nodes in maintenance mode on loopback, so
// `talosflash nodes`, `talosflash apply` and the app's Nodes step can be
// tried without a Raspberry Pi:
//
//	go run ./node/nodetest/fakenode --listen 127.0.0.2:50000 --talos v1.14.5 --image controlplane
//	go run ./node/nodetest/fakenode --listen 127.0.0.2:50000 --image controlplane \
//	    --listen 127.0.0.3:50000 --image worker --listen 127.0.0.4:50000 --talos v1.12.6 --image none
//
// Each --listen starts a node; the --talos/--image/--hostname flags after it
// (or before the first --listen) apply to it. Talos versions below v1.13
// behave like the old maintenance service. Only loopback addresses are
// accepted. Configs sent to a node are counted, never printed or stored.
// --card FILE[,FILE...] boots a node from each flashed card or image
// (cards.go): its address, hostname and image come from the card, the port
// from --port (default 50000), its version from the card unless a --talos
// follows it (a card flashed at v1.14.5 booted with --talos v1.14.4 is a
// node one release behind). The hostname stays the card's after a config
// whose HostnameConfig says `auto: stable` (a static hostname replaces it),
// as on a Pi; with --configured-talosconfig too.
// With --boot-config (default on for --card nodes) a node leaves maintenance
// after an apply that applies now and comes up configured with the config's
// machine.ca: the talosconfig generated with the configs connects to it.
//
// The cluster the configured nodes live (node/nodetest/cluster.go) has no
// CNI, like a fresh Talos cluster whose config drops Flannel: its
// Kubernetes nodes stay NotReady. --cni installs one as soon as the
// control plane's API runs (as if the user applied Cilium right after the
// bootstrap); without it, install it later by sending fakenode SIGUSR1
// (`kill -USR1 <pid>`, the pid is in fakenode's first line): every node of
// every cluster this process runs turns Ready, as with Cilium. Each
// cluster runs CoreDNS as a fresh Talos cluster does (scheduled once the
// CNI runs), so a drain evicts its pods ("kube-apiserver: evicted ..." in
// the log).
//
// A Talos 1.14 node checks configs as 1.14 does (node/nodetest/talos114.go);
// --rc1-rules adds the two rules of v1.14.0-rc.1 (UnattendedInstallConfig
// without a disk selector, KubeProxyConfig on a worker): the 1.14 sources
// keep them, a node's own dry run decides for its version; off by default
// so both answers can be tried.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math/bits"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// rc1Rules: --rc1-rules, for every node.
var rc1Rules bool

// bootConfig: --boot-config, for every node; unset, on for --card nodes
// only (a flashed card's node is the one an inventory apply configures).
var (
	bootConfig    bool
	bootConfigSet bool
)

// bootsConfig is whether a node leaves maintenance mode after an apply.
func (sp spec) bootsConfig() bool {
	if bootConfigSet {
		return bootConfig
	}
	return sp.card != ""
}

// configuredTalosconfig, if set by --configured-talosconfig FILE, runs
// configured nodes (see configured.go) instead of maintenance ones.
var configuredTalosconfig string

// cni: --cni, the user installs a CNI as soon as a cluster's API runs.
var cni bool

// cardPort: --port, the Talos API port of --card nodes (0: 50000).
var cardPort int

type spec struct {
	listen, talos, image, hostname string
	card                           string // boot from this card (cards.go)
}

func main() {
	log.SetFlags(log.Ltime)
	specs, profilesFile, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakenode:", err)
		os.Exit(2)
	}
	profiles := factory.BuiltinProfiles()
	if profilesFile != "" {
		custom, err := factory.LoadProfiles(profilesFile)
		if err != nil {
			log.Fatalf("profiles: %v", err)
		}
		profiles = factory.MergeProfiles(profiles, custom)
	}
	log.Printf("fakenode pid %d (kill -USR1 %d installs a CNI in the fake clusters)", os.Getpid(), os.Getpid())
	if configuredTalosconfig != "" {
		nodes, err := startConfigured(specs, profiles, configuredTalosconfig)
		if err != nil {
			log.Fatal(err)
		}
		waitSignals(func() []*nodetest.Node { return nodes })
		for _, n := range nodes {
			n.Close()
		}
		return
	}
	var servers []*nodetest.Server
	for i, sp := range specs {
		opts, err := options(sp, profiles, i)
		if err != nil {
			log.Fatalf("%s: %v", sp.name(), err)
		}
		srv, err := nodetest.New(opts)
		if err != nil {
			log.Fatalf("%s: %v", sp.name(), err)
		}
		servers = append(servers, srv)
		booted := "no extension statuses"
		if id := srv.SchematicID(); id != "" {
			booted = "schematic " + id
			if sp.image != "" { // a card's image is its schematic (cards.go)
				booted = "image " + sp.image + " (" + booted + ")"
			}
		}
		log.Printf("node %s: Talos %q in maintenance mode, %s, hostname %q", srv.Addr(), srv.TalosVersion(), booted, srv.BootedHostname())
		log.Printf("  talosctl apply-config --insecure --nodes %s --cert-fingerprint '%s' --file <config>", srv.Addr(), srv.CertFingerprint())
	}
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
	}
	if hint := scanHint(addrs); hint != "" {
		log.Printf("try: %s", hint)
	}
	waitSignals(func() []*nodetest.Node {
		var nodes []*nodetest.Node
		for _, s := range servers {
			if n := s.Node(); n != nil {
				nodes = append(nodes, n)
			}
		}
		return nodes
	})
	for _, s := range servers {
		s.Close()
	}
}

// waitSignals returns at SIGINT or SIGTERM; SIGUSR1 installs a CNI in
// every cluster API the nodes run.
func waitSignals(nodes func() []*nodetest.Node) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, append([]os.Signal{os.Interrupt, syscall.SIGTERM}, cniSignals...)...)
	for sig := range ch {
		if !slices.Contains(cniSignals, sig) {
			return
		}
		if installCNI(nodes()) == 0 {
			log.Printf("SIGUSR1: no cluster API runs yet (bootstrap a control plane first)")
		}
	}
}

// installCNI installs a CNI in each node's cluster API; it returns how many.
func installCNI(nodes []*nodetest.Node) int {
	count := 0
	for _, n := range nodes {
		if api := n.KubeAPI(); api != nil {
			api.InstallCNI()
			log.Printf("%s: CNI installed: the cluster's nodes turn Ready", n.Addr())
			count++
		}
	}
	return count
}

// name is how a node is called in messages: its card, else its address.
func (sp spec) name() string {
	if sp.card != "" {
		return sp.card
	}
	return sp.listen
}

// scanHint is the nodes command that finds every node: the smallest IPv4
// subnet holding all their addresses (they share one port), or "" when
// they do not share a port or are not IPv4.
func scanHint(addrs []string) string {
	var lo, hi uint32
	port := ""
	for i, a := range addrs {
		h, p, err := net.SplitHostPort(a)
		ip := net.ParseIP(h).To4()
		if err != nil || ip == nil || (i > 0 && p != port) {
			return ""
		}
		port = p
		v := binary.BigEndian.Uint32(ip)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	prefix := 32 - bits.Len32(lo^hi)
	if prefix > 29 {
		prefix = 29 // as the README's example; a /29 is 8 addresses
	}
	base := make(net.IP, 4)
	binary.BigEndian.PutUint32(base, lo&^(1<<(32-prefix)-1))
	return fmt.Sprintf("talosflash nodes --subnet %s/%d --port %s", base, prefix, port)
}

// parseArgs reads repeated --listen groups; flags before the first --listen
// are defaults for every node.
func parseArgs(args []string) ([]spec, string, error) {
	def := spec{talos: nodetest.DefaultVersion, image: "worker"}
	var specs []spec
	var profiles string
	cur := &def
	fs := flag.NewFlagSet("fakenode", flag.ContinueOnError)
	fs.Func("listen", "loopback host:port of a fake node (repeatable; default 127.0.0.2:50000)", func(v string) error {
		specs = append(specs, spec{listen: v, talos: def.talos, image: def.image})
		cur = &specs[len(specs)-1]
		return nil
	})
	fs.Func("talos", "Talos version the node reports (below v1.13: the old maintenance API)", func(v string) error { cur.talos = v; return nil })
	fs.Func("image", "what the node booted: a profile name (controlplane, worker, or from --profiles), or none (no extension statuses)", func(v string) error { cur.image = v; return nil })
	fs.Func("hostname", "hostname (default: a random-looking talos-xxx-yyy)", func(v string) error { cur.hostname = v; return nil })
	fs.Func("card", "flashed card or image FILE[,FILE...] to boot a node from each (repeatable): address, hostname and image from its META", func(v string) error {
		specs = append(specs, cardSpecs(v)...)
		cur = &specs[len(specs)-1]
		return nil
	})
	fs.BoolVar(&rc1Rules, "rc1-rules", false, "Talos 1.14 nodes also refuse what v1.14.0-rc.1 refuses (UnattendedInstallConfig without provisioning.diskSelector, KubeProxyConfig on a worker)")
	fs.BoolVar(&bootConfig, "boot-config", false, "after an apply that applies now (auto, no-reboot, reboot), the node comes up configured with that config's machine.ca (mTLS: its talosconfig connects; bootstrap works on a control plane); default on for --card nodes")
	fs.StringVar(&profiles, "profiles", "", "YAML file with custom profiles (for --image)")
	fs.StringVar(&configuredTalosconfig, "configured-talosconfig", "", "run configured nodes (mTLS, bootstrap, upgrade) and write their talosconfig to this new file")
	fs.IntVar(&cardPort, "port", 0, "Talos API port of the --card nodes (default 50000; talosflash's --port)")
	fs.BoolVar(&cni, "cni", false, "install a CNI in each cluster as soon as its Kubernetes API runs (its nodes turn Ready, as with Cilium); without it, send SIGUSR1 to install it later")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	bootConfigSet = false
	fs.Visit(func(f *flag.Flag) { bootConfigSet = bootConfigSet || f.Name == "boot-config" })
	if len(specs) == 0 {
		def.listen = "127.0.0.2:" + fmt.Sprint(node.DefaultPort)
		specs = []spec{def}
	}
	return specs, profiles, nil
}

func options(sp spec, profiles []factory.Profile, i int) (nodetest.Options, error) {
	if sp.card != "" {
		return cardOptions(sp, profiles, i)
	}
	host, _, err := net.SplitHostPort(sp.listen)
	if err != nil {
		return nodetest.Options{}, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nodetest.Options{}, fmt.Errorf("only loopback addresses (127.0.0.0/8, ::1): this fake must not be reachable from the network")
	}
	opts := nodetest.Options{
		Addr:         sp.listen,
		TalosVersion: sp.talos,
		Legacy:       !node.UnifiedMaintenance(sp.talos),
		RC1Rules:     rc1Rules,
		BootConfig:   sp.bootsConfig(),
		Hostname:     sp.hostname,
		CNI:          cni,
		CoreDNS:      true, // a fresh cluster's pods, for drains to evict
		MAC:          fmt.Sprintf("dc:a6:32:00:00:%02x", i+1),
		Logf:         func(f string, a ...any) { log.Printf(sp.listen+": "+f, a...) },
	}
	if opts.Hostname == "" {
		opts.Hostname = fmt.Sprintf("talos-%03x-%03x", 0xa1b+i*0x111, 0x2c3+i*0x222)
	}
	if !strings.EqualFold(sp.image, "none") {
		p, err := factory.FindProfile(profiles, sp.image)
		if err != nil {
			return opts, err
		}
		opts.Schematic = p.Schematic()
	}
	return opts, nil
}
