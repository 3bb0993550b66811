package nodetest

import (
	"strings"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"
)

// An upgrade that does not boot is undone by Talos itself (siderolabs/talos
// v1.14.0-rc.1):
//
//   - the installer of an upgrade writes the new installation beside the
//     running one (grub's A and B entries) and sets META tag Upgrade to the
//     label it replaces as the default (cmd/installer/pkg/install/
//     install.go, ModeUpgrade);
//   - the next boot is the new installation; once it is running and ready,
//     DropUpgradeFallbackController deletes the tag
//     (internal/app/machined/pkg/controllers/runtime/drop_upgrade_fallback.go):
//     the upgrade stays;
//   - when that boot's sequence fails first (a task's error, BootTimeout),
//     machined's handle reverts the bootloader before it reboots
//     (internal/app/machined/main.go handle, revert.go revertBootloader:
//     "reverting failed upgrade, switching to <label>", the tag deleted;
//     bootloader/grub/revert.go flips the default back), so the node comes
//     back on its previous version and schematic.
//
// The fake keeps the entry the node runs (label, version, schematic), the
// fallback while the tag is set, and lets a test make the new
// installation's boots fail (FailUpgradedBoot, NodeOptions.UpgradedBootFails).
// An installer that exits non-zero (SetUpgradeExitCode) installs nothing:
// the node keeps running its version, not rebooted.

// bootEntry is one installation on the node's disk.
type bootEntry struct {
	label, version string
	schematic      *schematic.Schematic
	schematicID    string // when the schematic YAML is unknown
}

func otherLabel(l string) string {
	if l == "A" {
		return "B"
	}
	return "A"
}

// stageInstallLocked is an installer that ran: ref boots at the next reboot, the
// running installation kept as the fallback (caller holds n.mu).
func (n *Node) stageInstallLocked(ref string) {
	n.staged = ref
	n.fallback = &bootEntry{label: n.label, version: n.version, schematic: n.schematic, schematicID: n.schematicID}
}

// nextEntryLocked is what the next boot runs (caller holds n.mu, in
// reboot): after a failed boot with the Upgrade tag set, the previous
// installation again (revert); else the staged installer's version and
// schematic, if any.
func (n *Node) nextEntryLocked() {
	if b := n.boot; b != nil && b.failed && n.fallback != nil {
		fb := n.fallback
		b.logLocked(n.sinceBootLocked(), "reverting failed upgrade, switching to %q", fb.label)
		n.label, n.version, n.schematic, n.schematicID = fb.label, fb.version, fb.schematic, fb.schematicID
		n.fallback, n.staged = nil, ""
		n.reverts++
		n.opts.Logf("boot %d failed: reverted to %s (%s)", n.bootID, fb.version, fb.label)
		return
	}
	if n.staged == "" {
		return
	}
	if v := n.staged[strings.LastIndex(n.staged, ":")+1:]; strings.HasPrefix(v, "v") {
		n.version = v
	}
	id := ""
	if i := strings.LastIndex(n.staged, "/"); i >= 0 {
		id, _, _ = strings.Cut(n.staged[i+1:], ":")
	}
	cur := ""
	if n.schematic != nil {
		cur, _ = n.schematic.ID()
	}
	if id != cur {
		n.schematic, n.schematicID = nil, id
	}
	n.label = otherLabel(n.label)
	n.staged = ""
}

// failingCauseLocked is the cause this boot fails with ("" it does not):
// a boot of a new installation while FailUpgradedBoot is set.
func (n *Node) failingCauseLocked() string {
	if n.fallback != nil && n.failBoot != "" {
		return n.failBoot
	}
	return ""
}

// armBootFailure fails the current boot's sequence a moment after its API
// came up, when it is a boot of a new installation that must fail; the
// node then reboots into its previous installation. Caller holds no lock.
func (n *Node) armBootFailure() {
	n.mu.Lock()
	b, boot := n.boot, n.bootID
	cause := ""
	if b != nil {
		cause = b.failing
	}
	wait := n.opts.RebootDowntime
	n.mu.Unlock()
	if cause == "" {
		return
	}
	go func() {
		select {
		case <-time.After(wait): // the boot gets as far as its services
		case <-n.stop:
			return
		}
		n.mu.Lock()
		due := n.bootID == boot && !n.closed && n.boot == b && !b.failed && !b.stopping
		if due {
			n.failBootLocked(b, n.sinceBootLocked(), cause)
		}
		n.mu.Unlock()
		if due {
			n.opts.Logf("boot %d: the new installation failed to boot: %s", boot, cause)
			n.sync() // stage rebooting
			go n.reboot("", "")
		}
	}()
}

// dropFallbackLocked is DropUpgradeFallbackController: a boot running and
// ready keeps its installation (caller holds n.mu).
// The controller acts once per boot: an upgrade staged later in the same
// boot keeps its fallback for the next one.
func (n *Node) dropFallbackLocked(b *bootRun) {
	if n.boot != b || b.fallbackDone || b.failing != "" {
		return
	}
	b.fallbackDone = true
	n.fallback = nil
}

// FailUpgradedBoot makes every boot of a new installation fail with cause
// (a task's error) until called with "": Talos reverts to the installation
// before the upgrade and reboots into it.
func (n *Node) FailUpgradedBoot(cause string) { n.mu.Lock(); n.failBoot = cause; n.mu.Unlock() }

// Reverts counts the failed upgrades the node reverted.
func (n *Node) Reverts() int { n.mu.Lock(); defer n.mu.Unlock(); return n.reverts }

// UpgradeFallback is the version META tag Upgrade falls back to ("" none).
func (n *Node) UpgradeFallback() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fallback == nil {
		return ""
	}
	return n.fallback.version
}

// RunningSchematicID is the schematic ID of the installation the node runs.
func (n *Node) RunningSchematicID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.schematic != nil {
		id, _ := n.schematic.ID()
		return id
	}
	return n.schematicID
}
