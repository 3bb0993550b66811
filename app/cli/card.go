package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"strings"

	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/inventory"
)

func init() {
	commandHelp["card"] = help{
		synopsis: "talosflash card DEVICE|FILE [--json]",
		about: "Read a card (or image file) back, read-only: its partition table, whether it\n" +
			"is a Talos image, the META keys it carries and the node (hostname, address,\n" +
			"gateway, DNS) written there, so unlabelled cards can be sorted. Reads only\n" +
			"the partition table and the 512 KiB META store; META values other than the\n" +
			"node's network config are never printed (some hold keys).",
		example: "talosflash card /dev/sdb\ntalosflash card worker-1.raw --json",
		order:   []string{"json"},
	}
}

type cardJSON struct {
	Path  string         `json:"path"`
	Size  int64          `json:"size"`
	Table *cardTableJSON `json:"partition_table"`
	Talos bool           `json:"talos_image"`
	// Incomplete: an interrupted flash (primary GPT missing or damaged, a
	// backup from an earlier flash still there): no META, no node.
	Incomplete bool            `json:"incomplete"`
	META       *cardMETAJSON   `json:"meta,omitempty"`
	Node       *cardNodeJSON   `json:"node"`
	Image      string          `json:"image"`
	Record     *cardRecordJSON `json:"record,omitempty"`
	Board      *cardBoardJSON  `json:"board,omitempty"`
	Problems   []string        `json:"problems"`
}

// cardBoardJSON is which board the card was written for, and how that is
// known: talosflash's record (META 0x0e), its boot partition's files.
type cardBoardJSON struct {
	Board  string `json:"board"`  // "" unknown
	Model  string `json:"model"`  // "Raspberry Pi 5"
	Source string `json:"source"` // "record" or "boot files"
	// BootFiles is the board the boot partition's files say ("" none, or
	// not readable: BootNote says why), Evidence the files that say it.
	BootFiles string `json:"boot_files"`
	Evidence  string `json:"evidence,omitempty"`
	BootNote  string `json:"boot_note,omitempty"`
}

type cardTableJSON struct {
	SectorSize int64           `json:"sector_size"`
	Primary    bool            `json:"primary_valid"`
	Backup     bool            `json:"backup_valid"`
	Partitions []cardPartition `json:"partitions"`
}

type cardPartition struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
}

type cardMETAJSON struct {
	Copy1 string        `json:"copy1"` // "valid" or why not
	Copy2 string        `json:"copy2"`
	Used  int           `json:"used_copy"`
	Blank bool          `json:"blank"`
	Keys  []cardMETAKey `json:"keys"`
}

type cardMETAKey struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Size int    `json:"size"`
}

type cardRecordJSON struct {
	Schematic    string `json:"schematic,omitempty"`
	TalosVersion string `json:"talos_version,omitempty"`
	Profile      string `json:"profile,omitempty"`
	Board        string `json:"board,omitempty"`
	Hostname     string `json:"hostname,omitempty"`
}

type cardNodeJSON struct {
	Hostname  string   `json:"hostname,omitempty"`
	Address   string   `json:"address,omitempty"`
	Gateway   string   `json:"gateway,omitempty"`
	Interface string   `json:"interface,omitempty"`
	DNS       []string `json:"dns,omitempty"`
}

// cardImageNote says what of the image's identity the card tells.
const cardImageNote = "not read: Talos keeps its version in the boot files (the BOOT " +
	"filesystem) and the schematic inside the initramfs; a booted node reports both (talosflash nodes)"

func runCard(_ context.Context, args []string, env Env) error {
	var jsonOut bool

	fs := newFlagSet("card", env)
	fs.BoolVar(&jsonOut, "json", false, "print JSON")

	path, err := parseWithFile(fs, args, "")
	if err != nil {
		return err
	}

	if path == "" {
		return usageErrorf("card: name the card or image file (e.g. talosflash card /dev/sdb)")
	}

	rep, size, err := inventory.ReadCardPath(path)
	switch {
	case errors.Is(err, inventory.ErrNotACard):
		return usageErrorf("card: %s is not a disk or an image file", path)
	case errors.Is(err, os.ErrNotExist): // a path that names nothing: the usage's mistake (docs/JSON.md)
		return withCode(contract.ExitUsage, fmt.Errorf("card: %w", err))
	case err != nil:
		return withCode(contract.ExitDevice, fmt.Errorf("card: %w", err))
	}

	out := describeCard(rep, path, size)

	if err := newAnswerPrinter(jsonOut, env).Answer(contract.TypeCard, out, func(w io.Writer) error {
		printCard(w, out)
		return nil
	}); err != nil {
		return err
	}

	if out.Incomplete {
		return withCode(contract.ExitImage, fmt.Errorf("card: %s is incomplete: an interrupted flash; flash it again", path))
	}

	if !out.Talos {
		return withCode(contract.ExitImage, fmt.Errorf("card: %s does not hold a Talos image", path))
	}

	return nil
}

func describeCard(rep *inventory.CardReport, path string, size int64) cardJSON {
	out := cardJSON{Path: path, Size: size, Image: cardImageNote, Problems: []string{}}

	out.Talos, out.Incomplete = rep.Talos, rep.Incomplete
	out.Problems = append(out.Problems, rep.Problems...)

	if t := rep.Table; t != nil {
		out.Table = &cardTableJSON{SectorSize: t.SectorSize, Primary: t.Primary, Backup: t.Backup, Partitions: []cardPartition{}}
		for _, p := range t.Partitions {
			if rep.Incomplete {
				break // an earlier flash's
			}

			out.Table.Partitions = append(out.Table.Partitions, cardPartition{p.Index, p.Name, p.Offset, p.Size})
		}
	}

	if c := rep.META; c != nil {
		m := &cardMETAJSON{Copy1: copyState(c.Status.Copy1), Copy2: copyState(c.Status.Copy2), Used: c.Status.Used, Blank: c.Status.Blank, Keys: []cardMETAKey{}}
		for _, k := range rep.Keys {
			m.Keys = append(m.Keys, cardMETAKey{Key: fmt.Sprintf("0x%02x", k.Key), Name: k.Name, Size: k.Size})
		}

		out.META = m
	}

	if r := rep.Record; r != nil {
		out.Image = fmt.Sprintf("schematic %s, Talos %s, profile %s (talosflash's record of the flash, META 0x0e)", dash(r.Schematic), dash(r.TalosVersion), dash(r.Profile))
		if r.Schematic == "" {
			out.Image = fmt.Sprintf("profile %s, flashed from a local image file: schematic and version not recorded (META 0x0e)", dash(r.Profile))
		}
		out.Record = &cardRecordJSON{Schematic: r.Schematic, TalosVersion: r.TalosVersion, Profile: r.Profile, Board: r.Board, Hostname: r.Hostname}
	}

	if b, source := rep.Board(); b != "" || rep.Boot != nil {
		j := &cardBoardJSON{Board: string(b), Model: b.Model(), Source: source}
		if boot := rep.Boot; boot != nil {
			j.BootFiles, j.Evidence = string(boot.Board), boot.Evidence
			switch {
			case boot.Err != nil:
				j.BootNote = "boot partition not read: " + boot.Err.Error()
			case boot.Board == "":
				j.BootNote = fmt.Sprintf("the boot partition's %d files name no board", boot.Files)
			}
		}
		out.Board = j
	}

	if info := rep.Node; info != nil {
		n := &cardNodeJSON{Hostname: info.Hostname, Interface: info.Interface}
		if info.Address.IsValid() {
			n.Address = info.Address.String()
		}

		if info.Gateway.IsValid() {
			n.Gateway = info.Gateway.String()
		}

		for _, d := range info.DNS {
			n.DNS = append(n.DNS, d.String())
		}

		out.Node = n
	}

	return out
}

// boardLine is the card's board in words: what says it, and whether the
// boot partition agrees.
func boardLine(b *cardBoardJSON) string {
	if b.Board == "" {
		return "unknown (" + b.BootNote + "; no talosflash record)"
	}
	line := fmt.Sprintf("%s (%s), from ", b.Model, b.Board)
	switch {
	case b.Source == "boot files":
		return line + "its boot partition's files: " + b.Evidence
	case b.BootFiles == b.Board:
		return line + "talosflash's record (META 0x0e); the boot partition agrees: " + b.Evidence
	case b.BootFiles != "":
		return line + "talosflash's record (META 0x0e), but the boot partition says " + b.BootFiles + ": " + b.Evidence
	}
	return line + "talosflash's record (META 0x0e); " + b.BootNote
}

func copyState(err error) string {
	if err == nil {
		return "valid"
	}

	return err.Error()
}

// printCard prints the card as text. Every string read from the card (its
// partition names, what META holds) is shown escaped (printable.String): a
// crafted card cannot clear the screen or forge a line.
func printCard(w io.Writer, c cardJSON) {
	p := printable.String
	fmt.Fprintf(w, "%s: %s\n", p(c.Path), humanize.IBytes(uint64(c.Size)))

	if c.Table != nil {
		copies := "primary and backup valid"
		switch {
		case c.Incomplete:
			copies = "primary missing or damaged; the backup is an earlier flash's, not used"
		case !c.Table.Primary:
			copies = "primary damaged, backup used"
		case !c.Table.Backup:
			copies = "backup missing or damaged"
		}

		fmt.Fprintf(w, "Partitions (GPT, %s):\n", copies)

		for _, part := range c.Table.Partitions {
			fmt.Fprintf(w, "  %d  %-10s %9s at %s\n", part.Index, dash(p(part.Name)), humanize.IBytes(uint64(part.Size)), humanize.IBytes(uint64(part.Offset)))
		}
	}

	switch {
	case c.Incomplete:
		fmt.Fprintln(w, "Talos image: incomplete: an interrupted flash; flash it again")
	case c.Talos:
		fmt.Fprintln(w, "Talos image: yes (EFI and META partitions)")
	default:
		fmt.Fprintln(w, "Talos image: no")
	}

	if c.META != nil {
		switch {
		case c.META.Used == 0 && c.META.Blank:
			fmt.Fprintln(w, "META: blank (as flashed; no keys)")
		case c.META.Used == 0:
			fmt.Fprintln(w, "META: not a Talos store")
		default:
			keys := make([]string, len(c.META.Keys))
			for i, k := range c.META.Keys {
				keys[i] = fmt.Sprintf("%s %s (%d bytes)", p(k.Key), p(k.Name), k.Size)
			}

			state := "both copies valid"
			if c.META.Copy1 != "valid" || c.META.Copy2 != "valid" {
				state = fmt.Sprintf("copy %d used (copy 1: %s; copy 2: %s)", c.META.Used, p(c.META.Copy1), p(c.META.Copy2))
			}

			if len(keys) == 0 {
				keys = []string{"none"}
			}

			fmt.Fprintf(w, "META: %s; keys: %s\n", state, strings.Join(keys, ", "))
		}
	}

	if n := c.Node; n != nil {
		line := strings.TrimPrefix(strings.Join([]string{p(n.Hostname), p(n.Address)}, ", "), ", ")
		if n.Gateway != "" {
			line += " via " + p(n.Gateway)
		}

		if n.Interface != "" {
			line += " on " + p(n.Interface)
		}

		if len(n.DNS) > 0 {
			line += ", DNS " + p(strings.Join(n.DNS, " "))
		}

		fmt.Fprintf(w, "Node: %s\n", line)

		if n.Hostname != "" {
			fmt.Fprintf(w, "Label it: %s\n", p(n.Hostname))
		}
	} else if c.Talos {
		fmt.Fprintln(w, "Node: none written (the Pi will take an address by DHCP and a generated hostname)")
	}

	if c.Talos {
		fmt.Fprintf(w, "Image and schematic: %s\n", p(c.Image))
	}

	if b := c.Board; b != nil && c.Talos {
		fmt.Fprintf(w, "Board: %s\n", p(boardLine(b)))
	}

	for _, problem := range c.Problems {
		fmt.Fprintf(w, "Note: %s\n", printable.String(problem))
	}
}
