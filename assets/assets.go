// Package assets embeds the files the app ships with (the icon).
package assets

import _ "embed"

// Icon is the application icon (PNG, 512x512).
//
//go:embed icon.png
var Icon []byte
