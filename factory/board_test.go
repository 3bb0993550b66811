package factory

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"gopkg.in/yaml.v3"
)

// The four role x board schematic IDs (docs/BOARDS.md lists them). Each is
// also the SHA-256 of the canonical YAML below, written out by hand: the
// ID the factory computes (image-factory pkg/schematic: ID = sha256 of
// Marshal), checked here without that package.
const (
	rpi4ControlPlaneID = controlPlaneID
	rpi4WorkerID       = workerID
	rpi5ControlPlaneID = "e761366799ebd34f6047dc1ec81548129662ca740498063e623c98eac71a3b81"
	rpi5WorkerID       = "a636242df247ad4aad2e36d1026d8d4727b716a3061749bd7b19651e548f65e4"

	rpi5ControlPlaneYAML = `overlay:
    image: siderolabs/sbc-raspberrypi
    name: rpi_5
customization:
    systemExtensions:
        officialExtensions:
            - siderolabs/newt
`
	rpi5WorkerYAML = `overlay:
    image: siderolabs/sbc-raspberrypi
    name: rpi_5
customization: {}
`
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestBoardTable(t *testing.T) {
	if got := strings.Join(BoardNames(), ","); got != "rpi4,rpi5" || DefaultBoard != BoardRPi4 {
		t.Fatalf("boards %s, default %s", got, DefaultBoard)
	}

	for _, c := range []struct {
		b            Board
		overlay, min string
		model        string
	}{
		{BoardRPi4, "rpi_generic", "", "Raspberry Pi 4B"},
		{BoardRPi5, "rpi_5", "v1.12.3", "Raspberry Pi 5"},
	} {
		o := c.b.Overlay()
		if o.Image != "siderolabs/sbc-raspberrypi" || o.Name != c.overlay || o.Options != nil {
			t.Errorf("%s: overlay %+v", c.b, o)
		}

		if c.b.MinTalosVersion() != c.min || c.b.Arch() != "arm64" || c.b.Model() != c.model || !c.b.Known() {
			t.Errorf("%s: min %q arch %s model %q", c.b, c.b.MinTalosVersion(), c.b.Arch(), c.b.Model())
		}

		// Read back from the overlay, options or not.
		o.Options = map[string]any{"configTxtAppend": "x"}
		if got, ok := BoardOfOverlay(o); !ok || got != c.b {
			t.Errorf("%s: BoardOfOverlay %q %v", c.b, got, ok)
		}
	}

	for _, o := range []schematic.Overlay{{}, {Image: "ghcr.io/me/sbc-raspberrypi", Name: "rpi_5"}, {Image: RPiOverlayImage, Name: "revpi_generic"}} {
		if b, ok := BoardOfOverlay(o); ok {
			t.Errorf("%+v read as board %s", o, b)
		}
	}

	if _, ok := BoardOfSchematic(nil); ok {
		t.Error("nil schematic has a board")
	}
}

func TestParseBoard(t *testing.T) {
	for _, name := range []string{"rpi4", "rpi5"} {
		if b, err := ParseBoard(name); err != nil || string(b) != name {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}

	for _, c := range []struct{ in, want string }{
		{"rpi_5", `unknown board "rpi_5" (did you mean rpi5? rpi_5 is its overlay's name; valid: rpi4, rpi5)`},
		{"rpi_generic", "did you mean rpi4? rpi_generic is its overlay's name; valid"},
		{"RPi5", "(did you mean rpi5?; valid: rpi4, rpi5)"},
		{"pi4", "did you mean rpi4?"},
		{"rpi5b", "did you mean rpi5?"},
		{"banana", `unknown board "banana" (valid: rpi4, rpi5)`},
		{"", "no board given (valid: rpi4, rpi5)"},
	} {
		_, err := ParseBoard(c.in)

		var ue *UnknownBoardError
		if !errors.Is(err, ErrUnknownBoard) || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "valid: rpi4, rpi5") {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}

	if _, err := ParseBoard("banana"); strings.Contains(err.Error(), "did you mean") {
		t.Errorf("no board is near banana: %v", err)
	}
}

func TestBoardVersion(t *testing.T) {
	for _, c := range []struct {
		b       Board
		version string
		ok      bool
	}{
		{BoardRPi5, "v1.12.2", false},
		{BoardRPi5, "v1.12.3-beta.0", false}, // a pre-release is below its release
		{BoardRPi5, "v1.11.5", false},
		{BoardRPi5, "v1.12.3", true},
		{BoardRPi5, "v1.13.0-alpha.0", true},
		{BoardRPi5, "v1.14.5", true},
		{BoardRPi4, "v1.7.0", true},
	} {
		err := c.b.CheckVersion(c.version)
		if c.ok != (err == nil) {
			t.Errorf("%s at %s: %v", c.b, c.version, err)

			continue
		}

		if err == nil {
			continue
		}

		var ve *BoardVersionError
		if !errors.Is(err, ErrBoardVersion) || !errors.As(err, &ve) || ve.MinVersion != "v1.12.3" || ve.Version != c.version {
			t.Errorf("%s at %s: %#v", c.b, c.version, err)
		}

		if want := "the Raspberry Pi 5 (board rpi5) needs Talos v1.12.3 or later, not " + c.version; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q, want it to begin %q", err, want)
		}
	}

	if err := Board("rpi3").CheckVersion("v1.14.5"); !errors.Is(err, ErrUnknownBoard) {
		t.Errorf("unknown board: %v", err)
	}
}

// The profile of role R for board B: the same schematic whichever way it is
// asked for, and the ID the factory would compute.
func TestRoleBoardProfiles(t *testing.T) {
	want := map[Board]map[string][2]string{
		BoardRPi4: {RoleControlPlane: {rpi4ControlPlaneID, controlPlaneYAML}, RoleWorker: {rpi4WorkerID, workerYAML}},
		BoardRPi5: {RoleControlPlane: {rpi5ControlPlaneID, rpi5ControlPlaneYAML}, RoleWorker: {rpi5WorkerID, rpi5WorkerYAML}},
	}

	if !reflect.DeepEqual(BuiltinProfiles(), BuiltinProfilesFor(DefaultBoard)) {
		t.Fatal("BuiltinProfiles is not the default board's")
	}

	for b, roles := range want {
		ps := BuiltinProfilesFor(b)
		if len(ps) != 2 || ps[0].Name != RoleControlPlane || ps[1].Name != RoleWorker {
			t.Fatalf("%s: %+v", b, ps)
		}

		for _, p := range ps {
			w := roles[p.Name]
			if err := p.Validate(); err != nil {
				t.Fatalf("%s/%s: %v", p.Name, b, err)
			}

			id, err := p.SchematicID()
			y, _ := p.Schematic().Marshal()

			if err != nil || id != w[0] || string(y) != w[1] || sha256Hex(w[1]) != w[0] {
				t.Errorf("%s/%s: ID %s (%v), want %s; YAML\n%s", p.Name, b, id, err, w[0], y)
			}

			if p.Board != b || !p.AnyBoard || p.TargetBoard() != b || !strings.HasPrefix(p.Description, b.Model()+" ") || !strings.Contains(p.Description, b.Overlay().Name) {
				t.Errorf("%s/%s: %+v", p.Name, b, p)
			}

			same, err := BuiltinProfile(p.Name, b)
			if err != nil || !reflect.DeepEqual(same, p) {
				t.Errorf("BuiltinProfile(%s, %s) = %+v, %v", p.Name, b, same, err)
			}

			// From the other board's profile of the same role.
			for _, other := range Boards() {
				from, _ := BuiltinProfile(p.Name, other)

				got, err := from.ForBoard(b)
				if err != nil || !reflect.DeepEqual(got, p) {
					t.Errorf("%s/%s.ForBoard(%s) = %+v, %v; want %+v", p.Name, other, b, got, err, p)
				}
			}
		}
	}

	if _, err := BuiltinProfile("wroker", BoardRPi5); err == nil || !strings.Contains(err.Error(), "controlplane, worker") {
		t.Errorf("unknown role: %v", err)
	}

	if _, err := BuiltinProfile(RoleWorker, "rpi3"); !errors.Is(err, ErrUnknownBoard) {
		t.Errorf("unknown board: %v", err)
	}

	if BuiltinProfilesFor("rpi3") != nil {
		t.Error("profiles for an unknown board")
	}
}

func TestForBoard(t *testing.T) {
	pinned := Profile{Name: "storage", Overlay: BoardRPi4.Overlay(), Extensions: []string{"siderolabs/iscsi-tools"}}

	if got, err := pinned.ForBoard(BoardRPi4); err != nil || got.Overlay.Name != RPiOverlayName {
		t.Errorf("pinned on its board: %+v %v", got, err)
	}

	_, err := pinned.ForBoard(BoardRPi5)

	var me *BoardMismatchError
	if !errors.As(err, &me) || !errors.Is(err, ErrBoardMismatch) || me.ProfileBoard != BoardRPi4 || me.Board != BoardRPi5 ||
		!strings.Contains(err.Error(), `profile "storage" is for the Raspberry Pi 4B (board rpi4, overlay rpi_generic), not board rpi5`) ||
		!strings.Contains(err.Error(), "board: any") {
		t.Errorf("pinned on another board: %v", err)
	}

	// No board's overlay: used as it is (TargetBoard "" tells the caller).
	plain := Profile{Name: "plain", Arch: "amd64"}
	if got, err := plain.ForBoard(BoardRPi5); err != nil || got.Overlay.Image != "" || got.TargetBoard() != "" {
		t.Errorf("plain: %+v %v", got, err)
	}

	// An any-board profile keeps what it adds to the overlay, and is not
	// changed itself.
	anyb := Profile{Name: "nvme", Board: BoardRPi4, AnyBoard: true, Overlay: BoardRPi4.Overlay(), Extensions: []string{"siderolabs/iscsi-tools"}}
	anyb.Overlay.Options = map[string]any{"configTxtAppend": "dtparam=pciex1_gen=3"}

	got, err := anyb.ForBoard(BoardRPi5)
	if err != nil || got.Board != BoardRPi5 || got.Overlay.Name != RPi5OverlayName || got.Overlay.Options["configTxtAppend"] != "dtparam=pciex1_gen=3" ||
		len(got.Extensions) != 1 || anyb.Overlay.Name != RPiOverlayName || got.Description != "" {
		t.Errorf("any board: %+v %v (from %+v)", got, err, anyb)
	}

	got.Overlay.Options["configTxtAppend"] = "changed"
	got.Extensions[0] = "changed"

	if anyb.Overlay.Options["configTxtAppend"] != "dtparam=pciex1_gen=3" || anyb.Extensions[0] != "siderolabs/iscsi-tools" {
		t.Errorf("ForBoard's result aliases the profile: %+v", anyb)
	}

	// Below the board's minimum Talos version: refused, naming it.
	old, _ := BuiltinProfile(RoleWorker, BoardRPi4)
	old.TalosVersion = "v1.12.2"

	if _, err := old.ForBoard(BoardRPi5); !errors.Is(err, ErrBoardVersion) || !strings.Contains(err.Error(), "needs Talos v1.12.3 or later, not v1.12.2") ||
		!strings.HasPrefix(err.Error(), `profile "worker": `) {
		t.Errorf("old version: %v", err)
	}

	if _, err := old.ForBoard(BoardRPi4); err != nil {
		t.Errorf("the Pi 4 at v1.12.2: %v", err)
	}

	if _, err := old.ForBoard("rpi_5"); !errors.Is(err, ErrUnknownBoard) || !strings.Contains(err.Error(), "did you mean rpi5") {
		t.Errorf("unknown board: %v", err)
	}

	// A version set after ForBoard is checked with CheckBoardVersion.
	p5, _ := BuiltinProfile(RoleWorker, BoardRPi5)
	p5.TalosVersion = "v1.11.0"

	if err := p5.CheckBoardVersion(); !errors.Is(err, ErrBoardVersion) {
		t.Errorf("CheckBoardVersion: %v", err)
	}

	if err := p5.Validate(); !errors.Is(err, ErrBoardVersion) {
		t.Errorf("Validate: %v", err)
	}
}

func TestValidateBoard(t *testing.T) {
	bad := map[string]Profile{
		"overlay not the board's": {Name: "a", Board: BoardRPi5, Overlay: BoardRPi4.Overlay()},
		"unknown board":           {Name: "a", Board: "rpi3", Overlay: BoardRPi4.Overlay()},
		"any board without one":   {Name: "a", AnyBoard: true},
		"amd64 on a Pi":           {Name: "a", Arch: "amd64", Overlay: BoardRPi5.Overlay()},
		"rpi_5 overlay too old":   {Name: "a", TalosVersion: "v1.12.2", Overlay: BoardRPi5.Overlay()},
	}

	for what, p := range bad {
		if err := p.Validate(); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

func TestExpandBoardsAndIDs(t *testing.T) {
	pinned := Profile{Name: "storage", Overlay: BoardRPi5.Overlay()}
	all := ExpandBoards(append(BuiltinProfiles(), pinned))

	var got []string
	for _, p := range all {
		got = append(got, p.Name+"/"+string(p.TargetBoard()))
	}

	if strings.Join(got, " ") != "controlplane/rpi4 controlplane/rpi5 worker/rpi4 worker/rpi5 storage/rpi5" {
		t.Fatalf("expanded: %v", got)
	}

	for id, want := range map[string]string{rpi4ControlPlaneID: "controlplane/rpi4", rpi5ControlPlaneID: "controlplane/rpi5", rpi4WorkerID: "worker/rpi4", rpi5WorkerID: "worker/rpi5"} {
		p, ok := ProfileOfSchematicID(BuiltinProfiles(), id)
		if !ok || p.Name+"/"+string(p.TargetBoard()) != want {
			t.Errorf("%s: %s/%s %v, want %s", id, p.Name, p.TargetBoard(), ok, want)
		}
	}

	if _, ok := ProfileOfSchematicID(BuiltinProfiles(), EmptySchematicID); ok {
		t.Error("the empty schematic is no role's")
	}

	// A version too old for the Pi 5 leaves the Pi 5 out.
	old := BuiltinProfiles()
	for i := range old {
		old[i].TalosVersion = "v1.12.2"
	}

	if n := len(ExpandBoards(old)); n != 2 {
		t.Errorf("at v1.12.2: %d images, want the Pi 4's 2", n)
	}
}

// What a profiles file's board: means, and the errors it names a line for.
func TestProfilesFileBoard(t *testing.T) {
	ps, err := ParseProfiles([]byte(`profiles:
  - name: pi5-worker
    board: rpi5
  - name: storage
    board: any
    extensions: [siderolabs/iscsi-tools]
  - name: pinned
    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_5}
  - name: old
    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}
`))
	if err != nil {
		t.Fatal(err)
	}

	if p := ps[0]; p.Board != BoardRPi5 || p.AnyBoard || !reflect.DeepEqual(p.Overlay, BoardRPi5.Overlay()) {
		t.Errorf("board: rpi5 -> %+v", p)
	}

	if id, _ := ps[0].SchematicID(); id != rpi5WorkerID {
		t.Errorf("board: rpi5 without extensions is the Pi 5 worker's schematic: %s", id)
	}

	if p := ps[1]; p.Board != DefaultBoard || !p.AnyBoard || !reflect.DeepEqual(p.Overlay, DefaultBoard.Overlay()) {
		t.Errorf("board: any -> %+v", p)
	}

	if p := ps[2]; p.TargetBoard() != BoardRPi5 || p.AnyBoard {
		t.Errorf("rpi_5 overlay -> %+v", p)
	}

	if _, err := ps[2].ForBoard(BoardRPi4); !errors.Is(err, ErrBoardMismatch) {
		t.Errorf("an overlay pins its board: %v", err)
	}

	if p := ps[3]; p.TargetBoard() != BoardRPi4 {
		t.Errorf("rpi_generic overlay -> %+v", p)
	}

	for what, c := range map[string]struct{ yaml, want string }{
		"typo": {"- name: a\n  board: rpi_5\n", `line 2: board: unknown board "rpi_5" (did you mean rpi5?`},
		"board and overlay": {"- name: a\n  board: rpi5\n  overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_5}\n",
			"line 2: profile gives both board: rpi5 and an overlay image/name"},
		"too old":  {"- name: a\n  board: rpi5\n  talosVersion: v1.12.2\n", "line 1: profile \"a\": the Raspberry Pi 5 (board rpi5) needs Talos v1.12.3 or later, not v1.12.2"},
		"not text": {"- name: a\n  board: [rpi5]\n", "line 2: board must be a string"},
		"amd64":    {"- name: a\n  board: rpi4\n  arch: amd64\n", "is arm64, not amd64"},
	} {
		_, err := ParseProfiles([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", what, err, c.want)
		}
	}
}

// overlay.options reach the schematic as the factory UI puts them there
// (image-factory internal/frontend/http/ui.go ToSchematic: the options text,
// trimmed, decoded as YAML into map[string]any, set as overlay.options), so
// the ID is the one the UI gets for the same options; and they change the
// ID.
func TestOverlayOptionsAsTheFactoryUI(t *testing.T) {
	// The "block" case's schematic as the factory stores and hashes it.
	const optionsYAML = `overlay:
    image: siderolabs/sbc-raspberrypi
    name: rpi_5
    options:
        configTxtAppend: |-
            dtparam=pciex1
            dtparam=pciex1_gen=3
customization: {}
`

	uiID := func(b Board, text string) string {
		var opts map[string]any
		if err := yaml.Unmarshal([]byte(strings.TrimSpace(text)), &opts); err != nil {
			t.Fatal(err)
		}

		s := schematic.Schematic{Overlay: b.Overlay()}
		s.Overlay.Options = opts

		id, err := s.ID()
		if err != nil {
			t.Fatal(err)
		}

		return id
	}

	for _, c := range []struct {
		what, profile, uiText string
		id                    string // pinned: docs/BOARDS.md shows it
	}{
		{"one line", "    overlay:\n      options:\n        configTxtAppend: dtparam=audio=on\n", "configTxtAppend: dtparam=audio=on", ""},
		// The UI trims the text, so a block that ends it has no final
		// newline; |- strips it in the profiles file.
		{"block", "    overlay:\n      options:\n        configTxtAppend: |-\n          dtparam=pciex1\n          dtparam=pciex1_gen=3\n",
			"configTxtAppend: |\n  dtparam=pciex1\n  dtparam=pciex1_gen=3\n", "5eb48915ff693f7f7727071e108c99fef0bd3a5137746fa2f0b8db22d1a3bea3"},
		{"both", "    overlay:\n      options:\n        configTxt: |\n          kernel=u-boot.bin\n          arm_64bit=1\n        configTxtAppend: |-\n          dtparam=pciex1\n",
			"configTxt: |\n  kernel=u-boot.bin\n  arm_64bit=1\nconfigTxtAppend: |\n  dtparam=pciex1", ""},
	} {
		ps, err := ParseProfiles([]byte("profiles:\n  - name: nvme\n    board: rpi5\n" + c.profile))
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}

		id, err := ps[0].SchematicID()
		if err != nil || id != uiID(BoardRPi5, c.uiText) || id == rpi5WorkerID {
			t.Errorf("%s: ID %s (%v), the factory UI's %s, without options %s", c.what, id, err, uiID(BoardRPi5, c.uiText), rpi5WorkerID)
		}

		if c.id != "" && id != c.id {
			t.Errorf("%s: ID %s, docs/BOARDS.md says %s", c.what, id, c.id)
		}

		if c.id != "" && sha256Hex(optionsYAML) != c.id {
			t.Errorf("%s: the canonical YAML by hand hashes to %s, not %s", c.what, sha256Hex(optionsYAML), c.id)
		}

		// The schematic as the factory stores it: options under overlay.
		y, _ := ps[0].Schematic().Marshal()
		if !strings.Contains(string(y), "    options:\n        configTxt") {
			t.Errorf("%s: schematic\n%s", c.what, y)
		}
	}

	// A trailing newline is part of the value, and of the ID.
	ps, err := ParseProfiles([]byte("- name: a\n  board: rpi5\n  overlay:\n    options:\n      configTxtAppend: |\n        dtparam=pciex1\n"))
	if err != nil {
		t.Fatal(err)
	}

	if id, _ := ps[0].SchematicID(); id != uiID(BoardRPi5, "configTxtAppend: \"dtparam=pciex1\\n\"") || id == uiID(BoardRPi5, "configTxtAppend: dtparam=pciex1") {
		t.Errorf("| keeps the newline: %s", id)
	}
}

func TestOverlayOptionsStrict(t *testing.T) {
	head := "- name: a\n  board: rpi5\n  overlay:\n    options:\n"

	for what, c := range map[string]struct{ opts, want string }{
		"typo":      {"      configTxtApend: x\n", `line 5: unknown overlay option "configTxtApend" for siderolabs/sbc-raspberrypi (did you mean configTxtAppend?; valid: configTxt, configTxtAppend)`},
		"case":      {"      configtxt: x\n", "did you mean configTxt?"},
		"unknown":   {"      fan: on\n", `unknown overlay option "fan" for siderolabs/sbc-raspberrypi (valid: configTxt, configTxtAppend)`},
		"number":    {"      configTxtAppend: 3\n", "line 5: overlay option configTxtAppend must be non-empty text"},
		"list":      {"      configTxtAppend: [a, b]\n", "line 5: overlay option configTxtAppend must be non-empty text"},
		"empty":     {"      configTxtAppend: \"\"\n", "must be non-empty text"},
		"null":      {"      configTxtAppend:\n", "must be non-empty text"},
		"bool":      {"      configTxt: true\n", "must be non-empty text"},
		"not a map": {"      - a\n", "overlay.options must be a mapping"},
	} {
		_, err := ParseProfiles([]byte(head + c.opts))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", what, err, c.want)
		}
	}

	// The same checks on a profile built in code (no line to name).
	p, _ := BuiltinProfile(RoleWorker, BoardRPi5)
	p.Overlay.Options = map[string]any{"configTxtAppend": 3}

	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "configTxtAppend must be non-empty text") {
		t.Errorf("code-built: %v", err)
	}

	p.Overlay.Options = map[string]any{"configTxtappend": "x"}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "did you mean configTxtAppend") {
		t.Errorf("code-built typo: %v", err)
	}

	// Another overlay's options are its own: passed as they are.
	ps, err := ParseProfiles([]byte("- name: a\n  overlay:\n    image: siderolabs/sbc-rockchip\n    name: turingrk1\n    options: {anything: [1, 2]}\n"))
	if err != nil || ps[0].Overlay.Options["anything"] == nil {
		t.Errorf("another overlay's options: %+v %v", ps, err)
	}
}
