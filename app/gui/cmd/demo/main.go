//go:build demo

// Command demo shows the talosflash window at one step, against a fake Image
// Factory on 127.0.0.1 and a file as the card (scripts/screenshots.sh):
//
//	go run -tags demo ./app/gui/cmd/demo -step flashing
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/talosflash/talosflash/app/gui"
)

func main() {
	step := flag.String("step", "image", "step to show: "+strings.Join(gui.DemoSteps, ", "))
	size := flag.String("size", "", "window size WIDTHxHEIGHT (default: the app's)")
	flag.Parse()
	var w, h float32
	if *size != "" {
		if _, err := fmt.Sscanf(*size, "%fx%f", &w, &h); err != nil || w < gui.MinWidth || h < gui.MinHeight {
			fmt.Fprintf(os.Stderr, "demo: -size %q: want WIDTHxHEIGHT, at least %dx%d\n", *size, gui.MinWidth, gui.MinHeight)
			os.Exit(2)
		}
	}
	if !slices.Contains(gui.DemoSteps, *step) {
		fmt.Fprintf(os.Stderr, "demo: unknown step %q (want one of %s)\n", *step, strings.Join(gui.DemoSteps, ", "))
		os.Exit(2)
	}
	if err := gui.RunDemo(*step, w, h); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
