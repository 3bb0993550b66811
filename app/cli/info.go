package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/talosflash/talosflash/imaging/devices"
)

func runSchematic(ctx context.Context, args []string, env Env) error {
	var f imageFlags
	var register, jsonOut bool
	fs := newFlagSet("schematic", env)
	f.register(fs)
	fs.BoolVar(&register, "register", false, "also register it with the Image Factory (POST /schematics) and check the ID")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.role == "" && f.installer == "" && f.installerFile == "" {
		return usageErrorf("schematic: give --role (controlplane, worker or a profile), --installer or --installer-file")
	}
	im, err := f.resolve(ctx, register)
	if err != nil {
		return err
	}
	var yaml string
	if im.Schematic != nil {
		b, err := im.Schematic.Marshal()
		if err != nil {
			return fmt.Errorf("marshal schematic: %w", err)
		}
		yaml = string(b)
	}
	if jsonOut {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{
			"id": im.SchematicID, "version": im.Version, "arch": im.Arch, "schematic": yaml,
			"image_url": im.URL, "installer": im.Installer.String(), "registered": register,
		})
	}
	if yaml != "" {
		fmt.Fprint(env.Stdout, yaml)
	} else {
		fmt.Fprintln(env.Stdout, "# schematic content unknown (this factory cannot return stored schematics)")
	}
	fmt.Fprintf(env.Stdout, "# id: %s\n# image: %s\n# installer: %s\n", im.SchematicID, im.URL, im.Installer)
	return nil
}

func runProfiles(_ context.Context, args []string, env Env) error {
	var profiles string
	fs := newFlagSet("profiles", env)
	fs.StringVar(&profiles, "profiles", "", "YAML file with custom profiles")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	all, err := loadProfiles(profiles)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tEXTENSIONS\tSCHEMATIC ID\tDESCRIPTION")
	for _, p := range all {
		id, err := p.SchematicID()
		if err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
		exts := strings.Join(p.Extensions, ",")
		if exts == "" {
			exts = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version(), exts, id, p.Description)
	}
	return tw.Flush()
}

func runDevices(_ context.Context, args []string, env Env) error {
	var jsonOut bool
	fs := newFlagSet("devices", env)
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	disks, err := devices.List()
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(env.Stdout).Encode(disks)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSIZE\tMODEL\tTRANSPORT\tTARGET")
	for _, d := range disks {
		verdict := "ok"
		if !d.Safe && d.Refusal != nil {
			verdict = "refused: " + d.Refusal.Msg
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Path, d.SizeHuman, d.Description(), d.Transport, verdict)
	}
	return tw.Flush()
}
