//go:build !unix

package devices

import "os"

// fileOwner: no uid here (Windows), so UsableCLI never takes the CLI and
// the elevated write re-runs the app, as before.
func fileOwner(os.FileInfo) (uint32, bool) { return 0, false }
