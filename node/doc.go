// Package node speaks to Talos nodes in maintenance mode (the insecure API
// on TCP 50000 of a node without a config): it finds them on the network,
// reads what each one booted (its image's schematic and extensions), checks a
// machine config against that for the incident this project exists for (an
// extension that waits for its ExtensionServiceConfig, so the node reboots
// every ~71 minutes), and applies the config like
// `talosctl apply-config --insecure`. Errors never carry config values.
package node
