package factory

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// InstallerTimeout bounds the installer check: the factory builds an
// installer on its first request (internal/frontend/http/registry.go
// handleManifest) before it answers, which takes minutes.
const InstallerTimeout = 10 * time.Minute

// ErrInstallerMissing: the factory has no installer for that schematic and version.
var ErrInstallerMissing = fmt.Errorf("installer image not available: %w", ErrNotFound)

// ociAccept is what a registry client sends for a manifest (OCI index first:
// the factory's installers are multi-arch indexes).
var ociAccept = strings.Join([]string{
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}, ", ")

// InstallerDigest asks the factory's OCI registry for the installer's
// manifest (HEAD /v2/<repository>/<schematic>/manifests/<version>), as a
// node's image pull would, and returns its digest ("" when the factory does
// not say). The factory answers an existing (or freshly built) installer
// with a 307 redirect to its storage registry, naming the digest; the
// redirect is not followed (its target is not the factory). A schematic or
// version the factory does not know is ErrInstallerMissing.
func (c *Client) InstallerDigest(ctx context.Context, ref InstallerRef) (string, error) {
	if c.baseErr != nil {
		return "", c.baseErr
	}
	if ref.Registry != c.RegistryHost() {
		return "", fmt.Errorf("installer %s: registry %s is not the factory at %s", ref, ref.Registry, c.BaseURL())
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, InstallerTimeout)
	defer cancel()

	u := c.base.JoinPath("v2", ref.Repository, ref.SchematicID, "manifests", ref.Version).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return "", fmt.Errorf("HEAD %s: %w", u, err)
	}
	req.Header.Set("Accept", ociAccept)
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		if parent.Err() == nil && ctx.Err() != nil {
			return "", fmt.Errorf("%w at %s: no answer about installer %s within %s", ErrUnreachable, c.BaseURL(), ref, InstallerTimeout)
		}
		return "", c.transportError(parent, ctx, http.MethodHead, u, unwrapURLError(err))
	}
	defer resp.Body.Close() //nolint:errcheck
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))

	switch {
	case resp.StatusCode == http.StatusOK:
		return resp.Header.Get("Docker-Content-Digest"), nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		loc := resp.Header.Get("Location")
		if i := strings.LastIndex(loc, "/manifests/"); i >= 0 {
			if d := strings.SplitN(loc[i+len("/manifests/"):], "?", 2)[0]; digestRe.MatchString(d) {
				return d, nil
			}
		}
		return resp.Header.Get("Docker-Content-Digest"), nil
	case resp.StatusCode == http.StatusNotFound:
		// HEAD has no body: say what was asked.
		return "", fmt.Errorf("%w: %s (the factory knows no such schematic or Talos version)", ErrInstallerMissing, ref)
	case resp.StatusCode == http.StatusUnauthorized:
		return "", fmt.Errorf("installer %s: the factory's registry asks for authentication: %w", ref, &HTTPError{Method: http.MethodHead, URL: u, Status: resp.StatusCode})
	}
	return "", fmt.Errorf("installer %s: %w", ref, &HTTPError{Method: http.MethodHead, URL: u, Status: resp.StatusCode})
}
