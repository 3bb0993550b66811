package node

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Sentinel errors, errors.Is-able, so the CLI can map failures to exit codes
// (3 network, 7 config invalid, 8 apply refused by node).
var (
	ErrNetwork       = errors.New("node unreachable")
	ErrRefused       = errors.New("node refused the request")
	ErrInvalidConfig = errors.New("invalid machine config")
)

// NetworkKind says why a node could not be reached.
type NetworkKind string

const (
	NetRefused     NetworkKind = "connection refused"
	NetTimeout     NetworkKind = "timeout"
	NetTLS         NetworkKind = "TLS handshake failed"
	NetUnreachable NetworkKind = "unreachable"
)

// NetworkError means the request never got a Talos answer: nothing listens,
// the node did not answer in time, or the port does not speak TLS.
type NetworkError struct {
	Endpoint string
	Kind     NetworkKind
	Timeout  time.Duration // set for NetTimeout
	Detail   string        // sanitized low-level reason
}

func (e *NetworkError) Error() string {
	switch e.Kind {
	case NetRefused:
		return fmt.Sprintf("cannot reach %s: connection refused (is the node booted and in maintenance mode? Talos listens on TCP %d)", e.Endpoint, DefaultPort)
	case NetTimeout:
		within := "in time"
		if d := roundWait(e.Timeout); d > 0 {
			within = "within " + d.String()
		}
		return fmt.Sprintf("no answer from %s %s (wrong address, node still booting, or a firewall drops the traffic)", e.Endpoint, within)
	case NetTLS:
		return fmt.Sprintf("TLS handshake with %s failed: %s", e.Endpoint, e.Detail)
	default:
		if e.Detail != "" {
			return fmt.Sprintf("cannot reach %s: %s", e.Endpoint, e.Detail)
		}
		return fmt.Sprintf("cannot reach %s", e.Endpoint)
	}
}

// roundWait is a wait as people give it: whole seconds from a second on
// (a deadline read a moment after it was set is 4.9998s), else 10 ms.
func roundWait(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// Is makes errors.Is(err, ErrNetwork) true.
func (e *NetworkError) Is(target error) bool { return target == ErrNetwork }

// RefusedError is an answer from the node that rejects the request
// (invalid config, unsupported mode, ...).
type RefusedError struct {
	Endpoint string
	Code     codes.Code
	Message  string // the node's message, sanitized
	// UnsupportedMode is set when the node rejected the apply mode
	// (Talos <= 1.12 maintenance mode only accepts auto, reboot and try).
	UnsupportedMode bool
	// Op names the refused request when it is not a config ("bootstrap", "upgrade").
	Op string
}

func (e *RefusedError) Error() string {
	if e.UnsupportedMode {
		return fmt.Sprintf("node refused the apply mode: %s; Talos <= 1.12 in maintenance mode only supports --mode auto, reboot or try (node %s)", e.Message, e.Endpoint)
	}
	if e.Op != "" {
		return fmt.Sprintf("node refused the %s: %s (node %s)", e.Op, e.Message, e.Endpoint)
	}
	return fmt.Sprintf("node refused the config: %s (node %s)", e.Message, e.Endpoint)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// ConfigError is a machine config that cannot be loaded. Reason never
// contains config values (they may be secrets).
type ConfigError struct {
	Line   int // 1-based, 0 if unknown
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("invalid machine config (line %d): %s", e.Line, e.Reason)
	}
	return "invalid machine config: " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
