package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// serve runs the fake Image Factory (factory/factorytest, 127.0.0.1 only)
// with the given image files served for every built-in role at the default
// Talos version, as metal-arm64.raw.xz / .raw.zst by their suffix; ROLE=FILE
// serves FILE for that role only (a cluster's two images). It prints the
// base URL and runs until stdin is closed.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	fs.Parse(args)
	if fs.NArg() == 0 {
		return errors.New("serve: need .xz and/or .zst files")
	}
	srv := factorytest.NewServer()
	defer srv.Close()
	srv.SetBuildDelay(0)
	for _, arg := range fs.Args() {
		role, path, ok := strings.Cut(arg, "=")
		if !ok {
			role, path = "", arg
		}
		name := "metal-arm64.raw.xz"
		if strings.HasSuffix(path, ".zst") {
			name = "metal-arm64.raw.zst"
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, p := range factory.BuiltinProfiles() {
			if role != "" && p.Name != role {
				continue
			}
			id, err := p.SchematicID()
			if err != nil {
				return err
			}
			srv.AddImage(id, p.Version(), name, data)
		}
	}
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, io.LimitReader(os.Stdin, 1<<20)) // until the caller closes stdin
	return nil
}

// inventory writes the test inventory (internal/testkit: cp-1, worker-1,
// worker-2 on 127.0.0.21-23, no configs) to the file named.
func writeInventory(args []string) error {
	if len(args) != 1 {
		return errors.New("inventory: need the file to write")
	}
	return os.WriteFile(args[0], []byte(testkit.Inventory{}.YAML()), 0o644)
}
