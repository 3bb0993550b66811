// Package packaging holds the files of the Linux packages (packaging/linux:
// the nfpm config, the desktop file and the polkit policy that
// scripts/release.sh puts into the .deb) and the test of a built .deb
// (`make release-test`). It has no Go code of its own.
package packaging
