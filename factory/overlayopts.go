package factory

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/internal/editdistance"
)

// RPiOverlayOptions are the overlay options the sbc-raspberrypi installers
// read, both text (rpiOptions in installers/rpi_generic/src/main.go and
// installers/rpi_5/src/main.go): configTxt replaces the overlay's own
// config.txt, configTxtAppend is written after it (after a newline). The
// installer decodes them leniently (talos pkg/machinery/overlay/adapter:
// a plain yaml Decode), so a misspelt key or a non-text value would be
// dropped silently on the card: talosflash refuses them instead.
var RPiOverlayOptions = []string{"configTxt", "configTxtAppend"}

// checkOverlayOptions refuses options the overlay would ignore. Only the
// official Raspberry Pi overlay's options are known; another overlay's are
// its own business and pass as they are.
func checkOverlayOptions(o schematic.Overlay) error {
	if o.Image != RPiOverlayImage {
		return nil
	}

	keys := make([]string, 0, len(o.Options))
	for k := range o.Options {
		keys = append(keys, k)
	}

	sort.Strings(keys)

	for _, k := range keys {
		if err := checkRPiOption(k); err != nil {
			return err
		}

		if s, ok := o.Options[k].(string); !ok || s == "" {
			return fmt.Errorf("overlay option %s must be non-empty text (config.txt lines), not %v", k, describeValue(o.Options[k]))
		}
	}

	return nil
}

// checkOverlayOptionsNode is checkOverlayOptions on the profile file's
// options mapping, naming the line at fault.
func checkOverlayOptionsNode(n *yaml.Node) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := checkRPiOption(k.Value); err != nil {
			return fmt.Errorf("line %d: %w", k.Line, err)
		}

		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" || v.Value == "" {
			return fmt.Errorf("line %d: overlay option %s must be non-empty text (config.txt lines, e.g. a `|` block), the way %s reads it", v.Line, k.Value, RPiOverlayImage)
		}
	}

	return nil
}

func checkRPiOption(key string) error {
	if slices.Contains(RPiOverlayOptions, key) {
		return nil
	}

	valid := strings.Join(RPiOverlayOptions, ", ")
	near, best := "", 4 // a typo: case, or up to 3 edits

	for _, o := range RPiOverlayOptions {
		if d := editdistance.Levenshtein(strings.ToLower(o), strings.ToLower(key)); d < best {
			near, best = o, d
		}
	}

	if near != "" {
		return fmt.Errorf("unknown overlay option %q for %s (did you mean %s?; valid: %s)", key, RPiOverlayImage, near, valid)
	}

	return fmt.Errorf("unknown overlay option %q for %s (valid: %s)", key, RPiOverlayImage, valid)
}

func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "empty"
	case string:
		return "empty text"
	default:
		return fmt.Sprintf("%T %v", v, v)
	}
}
