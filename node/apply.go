package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Apply modes, as talosctl apply-config --mode spells them.
const (
	ModeAuto     = "auto"
	ModeReboot   = "reboot"
	ModeNoReboot = "no-reboot"
	ModeTry      = "try"
	ModeStaged   = "staged"
)

// MaintenanceModes are the modes Talos <= 1.12 accepts in maintenance mode;
// Talos >= 1.13 accepts every mode (see ModesFor).
var MaintenanceModes = []string{ModeAuto, ModeReboot, ModeTry}

// ModesFor lists the apply modes a maintenance node running talosVersion
// accepts ("" or unreadable: Talos <= 1.12, which hides its version).
func ModesFor(talosVersion string) []string {
	if UnifiedMaintenance(talosVersion) {
		return []string{ModeAuto, ModeReboot, ModeNoReboot, ModeTry, ModeStaged}
	}
	return slices.Clone(MaintenanceModes)
}

const (
	DefaultApplyTimeout = 30 * time.Second
	DefaultTryTimeout   = time.Minute // talosctl's --timeout default for --mode try
)

// ApplyOptions configures Apply.
type ApplyOptions struct {
	Endpoint   string // host or host:port; port defaults to 50000
	Config     []byte // sent byte for byte
	Mode       string // auto|reboot|no-reboot|try|staged; "" = auto
	DryRun     bool
	Timeout    time.Duration // whole call; 0 = DefaultApplyTimeout
	TryTimeout time.Duration // --mode try rollback timer; 0 = DefaultTryTimeout
	// CertFingerprints pins the node's certificate (SPKI fingerprints as the
	// node's console prints them, or Node.CertFingerprint from discovery).
	// Empty: no check, like plain talosctl --insecure.
	CertFingerprints []string
	// Talosconfig, when set, sends to a configured node over mTLS with
	// the talosconfig's client certificate (os:admin), as `talosctl
	// apply-config` and `talosctl patch` do, instead of the maintenance
	// API; CertFingerprints are then not used (the CA verifies the node).
	Talosconfig *Talosconfig
}

// ApplyMessage is one node's answer.
type ApplyMessage struct {
	Node string // node name from the reply metadata ("" for a direct call)
	// Mode is the mode the node reports it used: Talos >= 1.13 answers
	// auto and reboot as "no-reboot"; Talos <= 1.12 leaves it unset ("").
	Mode        string
	ModeDetails string
	Warnings    []string
}

// ApplyResult is the node's answer to ApplyConfiguration.
type ApplyResult struct {
	Endpoint    string // normalized host:port
	Mode        string // requested mode
	DryRun      bool
	Messages    []ApplyMessage
	Warnings    []string // all messages' warnings
	ModeDetails string   // all messages' mode details, newline-joined
	// CertFingerprint is the node's TLS certificate SPKI fingerprint
	// (see CertFingerprint), for display or pinning.
	CertFingerprint string
}

// ParseMode maps a talosctl mode name to the API enum.
func ParseMode(mode string) (machine.ApplyConfigurationRequest_Mode, error) {
	switch strings.ToLower(strings.TrimSpace(mode)) {
	case "", ModeAuto:
		return machine.ApplyConfigurationRequest_AUTO, nil
	case ModeReboot:
		return machine.ApplyConfigurationRequest_REBOOT, nil
	case ModeNoReboot, "no_reboot":
		return machine.ApplyConfigurationRequest_NO_REBOOT, nil
	case ModeTry:
		return machine.ApplyConfigurationRequest_TRY, nil
	case ModeStaged:
		return machine.ApplyConfigurationRequest_STAGED, nil
	}
	return 0, fmt.Errorf("unknown apply mode %q (want auto, reboot, no-reboot, try or staged)", mode)
}

func modeName(m machine.ApplyConfigurationRequest_Mode) string {
	return strings.ReplaceAll(strings.ToLower(m.String()), "_", "-")
}

// Apply sends a machine config to a node over the insecure maintenance API,
// like `talosctl apply-config --insecure`. Errors are *NetworkError
// (ErrNetwork), *RefusedError (ErrRefused), a usage error for a bad mode or
// address, or ctx's error when cancelled.
func Apply(ctx context.Context, opts ApplyOptions) (*ApplyResult, error) {
	endpoint, err := NormalizeEndpoint(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	mode, err := ParseMode(opts.Mode)
	if err != nil {
		return nil, err
	}
	if len(opts.Config) == 0 {
		return nil, &ConfigError{Reason: "config is empty"}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultApplyTimeout
	}

	req := &machine.ApplyConfigurationRequest{Data: opts.Config, Mode: mode, DryRun: opts.DryRun}
	if mode == machine.ApplyConfigurationRequest_TRY {
		try := opts.TryTimeout
		if try <= 0 {
			try = DefaultTryTimeout
		}
		req.TryModeTimeout = durationpb.New(try)
	}

	// Whatever the node says back is scrubbed of the config's non-public values.
	echo := newConfigEcho(opts.Config)

	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	trace := &connTrace{}
	var c *client.Client
	if opts.Talosconfig != nil {
		c, err = newSecureClient(callCtx, endpoint, opts.Talosconfig, trace)
	} else {
		c, err = newInsecureClient(callCtx, endpoint, trace, opts.CertFingerprints)
	}
	if err != nil {
		return nil, &NetworkError{Endpoint: endpoint, Kind: NetUnreachable, Detail: sanitize(err.Error())}
	}
	defer c.Close() //nolint:errcheck

	resp, err := c.ApplyConfiguration(callCtx, req)
	if err != nil {
		if opts.Talosconfig != nil {
			s := &session{endpoint: endpoint, timeout: timeout, trace: trace, c: c}
			return nil, echo.scrubError(s.err(ctx, "apply", err))
		}
		return nil, echo.scrubError(classify(ctx, endpoint, timeout, err, trace))
	}

	res := &ApplyResult{
		Endpoint:        endpoint,
		Mode:            modeName(mode),
		DryRun:          opts.DryRun,
		CertFingerprint: CertFingerprint(trace.snapshot().serverCert),
	}
	var details []string
	for _, m := range resp.GetMessages() {
		msg := ApplyMessage{
			Node:        printable(m.GetMetadata().GetHostname(), maxHostname),
			Mode:        modeName(m.GetMode()),
			ModeDetails: echo.scrub(sanitizeLines(m.GetModeDetails())),
		}
		// REBOOT is the enum's zero value: a node >= 1.13 never answers it
		// in maintenance mode (it becomes NO_REBOOT), so it means "unset",
		// as Talos <= 1.12 replies.
		if m.GetMode() == machine.ApplyConfigurationRequest_REBOOT {
			msg.Mode = ""
		}
		for _, w := range m.GetWarnings() {
			msg.Warnings = append(msg.Warnings, echo.scrub(sanitize(w)))
		}
		res.Messages = append(res.Messages, msg)
		res.Warnings = append(res.Warnings, msg.Warnings...)
		if m.GetModeDetails() != "" {
			details = append(details, m.GetModeDetails())
		}
	}
	res.ModeDetails = echo.scrub(sanitizeLines(strings.Join(details, "\n")))
	return res, nil
}
