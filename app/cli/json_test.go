package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// jsonKeys returns every object key in a decoded JSON value, as paths.
func jsonKeys(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[prefix+k] = true
			jsonKeys(e, prefix+k+".", out)
		}
	case []any:
		for _, e := range x {
			jsonKeys(e, prefix, out)
		}
	}
}

// assertSnakeCase decodes data (one JSON document) and checks every key;
// it returns the key paths for further checks.
func assertSnakeCase(t *testing.T, what string, data []byte) map[string]bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: not JSON: %v: %q", what, err, data)
	}
	keys := map[string]bool{}
	jsonKeys(v, "", keys)
	for k := range keys {
		if !snakeCase.MatchString(k[strings.LastIndex(k, ".")+1:]) {
			t.Errorf("%s: key %q is not snake_case", what, k)
		}
	}
	return keys
}

func wantKeys(t *testing.T, what string, keys map[string]bool, want ...string) {
	t.Helper()
	for _, k := range want {
		if !keys[k] {
			t.Errorf("%s: no key %q (have %v)", what, k, keys)
		}
	}
}

// `devices --json` used Go field names (SizeHuman, Refusal.Msg).
func TestDevicesJSONKeys(t *testing.T) {
	disk := devices.Disk{Name: "sdb", Path: "/dev/sdb", Size: 32 << 30, SizeHuman: "32.0 GiB", Transport: devices.TransportUSB,
		MMCType: "SD", Partitions: []devices.Partition{{Name: "sdb1", Path: "/dev/sdb1", Number: 1,
			Mounts: []devices.Mount{{Point: "/media/u/boot", FSType: "vfat", Via: "dm-0"}}}},
		Refusal: &devices.RefusedError{Device: "/dev/sdb", Reason: devices.CodeMounted, Msg: "mounted", Suggestion: "/dev/sdc"}}
	data, err := json.Marshal(devicesJSON([]devices.Disk{disk}))
	if err != nil {
		t.Fatal(err)
	}
	keys := assertSnakeCase(t, "devicesJSON", data)
	wantKeys(t, "devicesJSON", keys, "size_human", "read_only", "mmc_type", "refusal.message", "refusal.reason",
		"refusal.suggestion", "partitions.mounts.fs_type", "partitions.mounts.via", "holders")

	// The real command, with a loop device attached when we are root.
	var loop string
	if os.Geteuid() == 0 {
		loop = imagetest.LoopDevice(t, 1<<20, false)
	}
	code, stdout, stderr := cliRun(t, "devices", "--json")
	if code != contract.ExitOK {
		t.Fatalf("devices --json: exit %d: %s", code, stderr)
	}
	assertSnakeCase(t, "devices --json", answer(t, stdout, contract.TypeDevices))
	if loop == "" {
		return
	}
	var list []diskJSON
	if err := json.Unmarshal(answer(t, stdout, contract.TypeDevices), &list); err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.Path == loop {
			if d.Safe || d.Refusal == nil || !strings.Contains(d.Refusal.Message, "--allow-loop") {
				t.Fatalf("loop device %s: safe %v refusal %+v; want refused naming --allow-loop", loop, d.Safe, d.Refusal)
			}
			return
		}
	}
	t.Fatalf("loop device %s not listed:\n%s", loop, stdout)
}

func TestSchematicNodesApplyJSONKeys(t *testing.T) {
	code, stdout, stderr := cliRun(t, "schematic", "--role", "worker", "--json")
	if code != contract.ExitOK {
		t.Fatalf("schematic: exit %d: %s", code, stderr)
	}
	wantKeys(t, "schematic --json", assertSnakeCase(t, "schematic --json", answer(t, stdout, contract.TypeSchematic)), "id", "image_url")

	srv := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.1:0", Hostname: "pi-1"})
	code, stdout, stderr = cliRun(t, "nodes", "--subnet", "127.0.0.1/32", "--port", strconv.Itoa(srv.Port()), "--json")
	if code != contract.ExitOK {
		t.Fatalf("nodes: exit %d: %s", code, stderr)
	}
	keys := assertSnakeCase(t, "nodes --json", answer(t, stdout, contract.TypeNodes))
	wantKeys(t, "nodes --json", keys, "address", "maintenance", "talos_version", "cert_fingerprint")
	if !strings.Contains(stdout, `"address":"`+srv.Addr()+`"`) {
		t.Errorf("nodes --json lacks the server's address %s: %s", srv.Addr(), stdout)
	}

	worker := testkit.Testdata(t, "worker.yaml")
	file := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(file, worker, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = cliRun(t, "apply", "--node", srv.Addr(), "--file", file, "--role", "worker", "--dry-run", "--json")
	if code != contract.ExitOK {
		t.Fatalf("apply: exit %d: %s", code, stderr)
	}
	keys = assertSnakeCase(t, "apply --json", answer(t, stdout, contract.TypeApply))
	wantKeys(t, "apply --json", keys, "endpoint", "dry_run", "mode_details", "messages")
	if len(srv.Requests()) != 1 || !srv.Requests()[0].DryRun {
		t.Fatalf("server got %d requests, want one dry run", len(srv.Requests()))
	}
}

// answer checks that every stdout line of a --json run is an event of the
// contract (decoded by its decoder, with its envelope) and returns the
// answer of type event: a list answer's list, an object answer's line.
func answer(t *testing.T, stdout, event string) []byte {
	t.Helper()
	var found []byte
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		ev, ok := contract.Decode([]byte(line))
		if !ok || ev.Contract != contract.Version || !contract.Known(ev.Type) {
			t.Fatalf("stdout line %d is not an event of contract %d: %q", i+1, contract.Version, line)
		}
		if ev.Type != event {
			continue
		}
		var fields map[string]json.RawMessage
		if err := ev.Into(&fields); err != nil {
			t.Fatal(err)
		}
		found = ev.Line
		if list, ok := fields[event]; ok && len(list) > 0 && list[0] == '[' {
			found = list
		}
	}
	if found == nil {
		t.Fatalf("no %q event in %q", event, stdout)
	}
	assertSnakeCase(t, event+" --json", found) // one key style for the whole contract
	return found
}

// jsonLines parses every stdout line of a --json run as one JSON object
// with an "event", and returns them.
func jsonLines(t *testing.T, what, stdout string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%s: stdout line %d is not a JSON object: %q", what, i+1, line)
		}
		if e, ok := contract.Decode([]byte(line)); !ok || e.Contract != contract.Version || !contract.Known(e.Type) {
			t.Fatalf("%s: stdout line %d is not an event of contract %d: %q", what, i+1, contract.Version, line)
		}
		assertSnakeCase(t, what, []byte(line))
		evs = append(evs, ev)
	}
	return evs
}

// With --json, stdout is only JSON event lines; human text is on stderr
// (the "info" messages used to go to stdout as JSON).
func TestFlashJSONStdoutIsOnlyJSON(t *testing.T) {
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "card.img")
	code, stdout, stderr := cliRun(t, "--flash", "--role", "controlplane", "--device", target, "--yes", "--create-file", "--json",
		"--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if imagetest.FileSHA256(t, target, imageSize) != fx.SHA256 {
		t.Fatal("card does not hold the image")
	}
	counts := map[string]int{}
	for _, ev := range jsonLines(t, "flash --json", stdout) {
		counts[ev["event"].(string)]++
	}
	if counts["info"] != 0 || counts["result"] != 1 || counts["warning"] != 1 || counts["progress"] == 0 {
		t.Fatalf("events %v: want progress, one warning (newt), one result, no info", counts)
	}
	for _, want := range []string{"image: ", "warning: ", "wrote ", "next: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks the human line %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "{") {
		t.Errorf("JSON on stderr:\n%s", stderr)
	}

	// A failure: an "error" event on stdout, the message on stderr.
	code, stdout, stderr = cliRun(t, "--flash", "--role", "worker", "--device", filepath.Join(dir, "nope", "card.img"), "--yes", "--create-file", "--json",
		"--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	evs := jsonLines(t, "failed flash --json", stdout)
	if code == contract.ExitOK || len(evs) == 0 || evs[len(evs)-1]["event"] != "error" || !strings.HasPrefix(stderr, "talosflash: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// The elevated child still sends its human text as "info" events: its
// parent relays them (app/elevate reads only stdout).
func TestElevatedChildRelaysInfo(t *testing.T) {
	dir := t.TempDir()
	_, fx := fakeFactory(t)
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := childRun(t, elevate.Args{Devices: []string{filepath.Join(dir, "card.img")}}, img)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	infos := 0
	for _, ev := range jsonLines(t, "elevated child", out) {
		if ev["event"] == "info" {
			infos++
		}
	}
	if imagetest.FileSHA256(t, filepath.Join(dir, "card.img"), imageSize) != fx.SHA256 {
		t.Fatal("card does not hold the image")
	}
	if infos == 0 || errOut != "" {
		t.Fatalf("child: %d info events, stderr %q", infos, errOut)
	}
}

// jsonCommands are the commands with --json and the tests that decode their
// output with the contract's decoder (answer, jsonLines).
var jsonCommands = map[string]string{
	"flash":      "TestFlashJSONStdoutIsOnlyJSON",
	"schematic":  "TestSchematicNodesApplyJSONKeys, TestEveryJSONRunPrintsJSON",
	"devices":    "TestDevicesJSONKeys",
	"nodes":      "TestSchematicNodesApplyJSONKeys",
	"apply":      "TestSchematicNodesApplyJSONKeys, TestApplyJSONBlocked",
	"bootstrap":  "TestBootstrapCommand",
	"upgrade":    "TestUpgradeCommandUpgradesInOrder, TestUserStoryRollingUpgrade",
	"outdated":   "TestOutdatedCommand, TestOutdatedKubernetesAndNewtVersions",
	"patch":      "TestUserStoryPatchNewt",
	"card":       "TestCardReadsNode",
	"inventory":  "TestInventoryInitThenCheck, TestInventoryCheckProblems",
	"status":     "TestStatusHealthyControlPlane, TestStatusIncidentWaitingExtension, TestStatusKubernetesView",
	"kubeconfig": "TestKubeconfigCommand",
	"etcd":       "TestEtcdSnapshotCommand",
	"version":    "TestEveryJSONRunPrintsJSON",
	"profiles":   "TestEveryJSONRunPrintsJSON",
}

// Every command that takes --json writes the contract's envelope: a new
// one must be added to jsonCommands (with a test that decodes it), and a
// failure of each, even a usage error found before anything ran, ends its
// stdout with an "error" event carrying the exit code.
func TestEveryJSONCommandWritesTheContract(t *testing.T) {
	for cmd := range commandHelp {
		_, help, _ := cliRun(t, cmd, "-h")
		if _, listed := jsonCommands[cmd]; strings.Contains(help, "--json") != listed {
			t.Errorf("%s: takes --json: %v, listed in jsonCommands: %v", cmd, !listed, listed)
		}
	}
	for cmd := range jsonCommands {
		args := []string{cmd, "--json", "--no-such-flag"}
		if cmd == "inventory" {
			args = []string{cmd, "check", "--json", "--no-such-flag"} // its --json is check's
		}
		code, stdout, stderr := cliRun(t, args...)
		evs := jsonLines(t, cmd, stdout)
		if code != contract.ExitUsage || len(evs) != 1 || evs[0]["event"] != contract.TypeError || evs[0]["code"] != float64(contract.ExitUsage) ||
			!strings.Contains(evs[0]["message"].(string), "no-such-flag") || !strings.Contains(stderr, "no-such-flag") {
			t.Errorf("%s --json --no-such-flag: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
	}
}

// Every --json run prints JSON on stdout, whatever else it is asked: each
// command's offline runs (the others' are in jsonCommands' tests) end
// with their answer, or with the error line when the combination is not
// one --json can answer; never text (version --json, inventory init
// --json and schematic --installer-yaml --json printed text).
func TestEveryJSONRunPrintsJSON(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	card := testkit.TalosCard(t, "card.img")
	for _, c := range []struct {
		args  []string
		event string // the answer's event ("error": refused, exit 2)
	}{
		{[]string{"version", "--json"}, contract.TypeVersion},
		{[]string{"--version", "--json"}, contract.TypeVersion},
		{[]string{"profiles", "--json"}, contract.TypeProfiles},
		{[]string{"schematic", "--role", "worker", "--json"}, contract.TypeSchematic},
		{[]string{"schematic", "--role", "worker", "--installer-yaml", "--json"}, contract.TypeError},
		{[]string{"devices", "--json"}, contract.TypeDevices},
		{[]string{"card", card, "--json"}, contract.TypeCard},
		{[]string{"inventory", "check", inv, "--json"}, contract.TypeInventory},
		{[]string{"inventory", "init", filepath.Join(dir, "new.yaml"), "--json"}, contract.TypeError},
		{[]string{"outdated", dir, "--json"}, contract.TypeOutdated},
	} {
		code, stdout, stderr := cliRun(t, c.args...)
		if stdout == "" {
			t.Errorf("%q: exit %d, nothing on stdout: %s", c.args, code, stderr)
			continue
		}
		evs := jsonLines(t, strings.Join(c.args, " "), stdout)
		last := evs[len(evs)-1]
		if last["event"] != c.event || (c.event == contract.TypeError) != (code == contract.ExitUsage) || (c.event != contract.TypeError && code != contract.ExitOK) {
			t.Errorf("%q: exit %d, last line %v, want a %q line: %s", c.args, code, last, c.event, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.yaml")); err == nil {
		t.Error("inventory init --json wrote the file while answering an error")
	}
	code, stdout, _ := cliRun(t, "version", "--json")
	var v struct{ Version string }
	if code != contract.ExitOK || json.Unmarshal(answer(t, stdout, contract.TypeVersion), &v) != nil || v.Version != Version {
		t.Fatalf("version --json: %s", stdout)
	}
	code, stdout, _ = cliRun(t, "profiles", "--json")
	var profiles []profileJSON
	// Each role once per board (factory.ExpandBoards), the default board first.
	if code != contract.ExitOK || json.Unmarshal(answer(t, stdout, contract.TypeProfiles), &profiles) != nil || len(profiles) != 4 ||
		profiles[0].Name != "controlplane" || profiles[0].Board != "rpi4" || profiles[0].SchematicID != cpID || len(profiles[0].Extensions) != 1 ||
		profiles[1].Name != "controlplane" || profiles[1].Board != "rpi5" || profiles[1].Overlay.Name != "rpi_5" ||
		profiles[2].SchematicID != workerID || profiles[3].Name != "worker" || profiles[3].Board != "rpi5" {
		t.Fatalf("profiles --json: %s", stdout)
	}
}
