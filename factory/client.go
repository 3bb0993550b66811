package factory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/blang/semver/v4"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/siderolabs/image-factory/pkg/client"
	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/internal/editdistance"
)

// ExtensionInfo is one entry of /version/<v>/extensions/official.
type ExtensionInfo = client.ExtensionInfo

// OverlayInfo is one entry of /version/<v>/overlays/official.
type OverlayInfo = client.OverlayInfo

// Errors callers can test with errors.Is to pick an exit code or message.
var (
	ErrNotFound                   = errors.New("not found")
	ErrUnknownSchematic           = fmt.Errorf("unknown schematic: %w", ErrNotFound)
	ErrUnknownVersion             = fmt.Errorf("unknown Talos version: %w", ErrNotFound)
	ErrUnknownExtension           = errors.New("unknown extension")
	ErrUnknownOverlay             = errors.New("unknown overlay")
	ErrSchematicLookupUnsupported = errors.New("this Image Factory cannot return stored schematics (GET /schematics/<id> needs a newer image-factory)")
	ErrSchematicRejected          = errors.New("image factory rejected the schematic")
	ErrIDMismatch                 = errors.New("image factory returned a different schematic ID than computed offline")
	ErrBadResponse                = errors.New("unexpected response from image factory")
	ErrUnreachable                = errors.New("cannot reach image factory")
)

// HTTPError is a 4xx/5xx reply. Body is the server's text, trimmed.
type HTTPError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}

	return msg
}

// Is makes 404 replies match ErrNotFound.
func (e *HTTPError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// IDMismatchError carries both IDs of ErrIDMismatch.
type IDMismatchError struct{ Local, Remote string }

func (e *IDMismatchError) Error() string {
	return fmt.Sprintf("%v: offline %s, factory %s (is the base URL a real Image Factory?)", ErrIDMismatch, e.Local, e.Remote)
}

func (e *IDMismatchError) Unwrap() error { return ErrIDMismatch }

// Timeouts for metadata calls (APITimeout bounds each whole call). Image
// downloads get no overall timeout and no header timeout: they are hundreds
// of MiB on slow links, and Image Factory builds a new image (minutes)
// before it sends any header; imaging bounds that wait itself.
const (
	APITimeout     = 30 * time.Second
	DialTimeout    = 10 * time.Second
	maxAPIResponse = 8 << 20
	maxErrorBody   = 300
)

// Client talks to an Image Factory.
type Client struct {
	base    *url.URL
	baseErr error
	http    *http.Client
}

// NewHTTPClient returns the http.Client talosflash uses for the factory:
// proxy from the environment, bounded dial/TLS waits, no overall or header
// timeout (so it is fit for image downloads, which wait for a build too).
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = DialTimeout

	return &http.Client{Transport: t}
}

// NewClient returns a client for baseURL ("" -> DefaultBaseURL). A nil
// httpClient uses NewHTTPClient. An invalid baseURL is reported by every call.
func NewClient(baseURL string, httpClient *http.Client) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}

	if httpClient == nil {
		httpClient = NewHTTPClient()
	}

	c := &Client{http: httpClient}

	u, err := url.Parse(strings.TrimRight(baseURL, "/"))

	switch {
	case err != nil:
		c.baseErr = fmt.Errorf("image factory URL %q: %w", baseURL, err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		c.baseErr = fmt.Errorf("image factory URL %q must be http(s)://host[:port]", baseURL)
	case u.RawQuery != "" || u.Fragment != "":
		c.baseErr = fmt.Errorf("image factory URL %q must not have a query or fragment", baseURL)
	}

	if c.baseErr != nil {
		// Nothing leaves the machine for an unusable URL: its requests
		// (the API's and, through HTTPClient, the downloads') fail with
		// the reason before any name lookup or dial. The stand-in host
		// is never resolved.
		u = &url.URL{Scheme: "https", Host: "invalid.invalid"}
		refused := *httpClient
		refused.Transport = refuseTransport{c.baseErr}
		c.http = &refused
	}

	c.base = u

	return c
}

// refuseTransport answers every request with err, sending nothing.
type refuseTransport struct{ err error }

func (t refuseTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, t.err }

// BaseURL returns the factory's base URL without a trailing slash.
func (c *Client) BaseURL() string { return c.base.String() }

// HTTPClient returns the http.Client used (for image downloads).
func (c *Client) HTTPClient() *http.Client { return c.http }

// RegistryHost is the host[:port] the factory serves installer images on.
func (c *Client) RegistryHost() string { return c.base.Host }

// ImageURL is <base>/image/<id>/<version>/metal-<arch>.raw.xz ("" arch -> arm64).
func (c *Client) ImageURL(id, version, arch string) string {
	if arch == "" {
		arch = DefaultArch
	}

	return c.base.JoinPath("image", id, version, "metal-"+arch+".raw.xz").String()
}

// Register posts the schematic and checks that the factory's ID equals the
// offline one.
func (c *Client) Register(ctx context.Context, s *schematic.Schematic) (string, error) {
	local, err := SchematicID(s)
	if err != nil {
		return "", err
	}

	body, err := s.Marshal()
	if err != nil {
		return "", fmt.Errorf("register schematic: %w", err)
	}

	var resp struct {
		ID string `json:"id"`
	}

	err = c.do(ctx, http.MethodPost, "/schematics", body, &resp, http.StatusCreated, http.StatusOK)

	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusBadRequest {
		return "", fmt.Errorf("register schematic: %w: %w", ErrSchematicRejected, err)
	}

	if err != nil {
		return "", fmt.Errorf("register schematic: %w", err)
	}

	if resp.ID == "" {
		return "", fmt.Errorf("register schematic: %w: reply has no id", ErrBadResponse)
	}

	if resp.ID != local {
		return "", &IDMismatchError{Local: local, Remote: resp.ID}
	}

	return resp.ID, nil
}

// Schematic fetches a stored schematic. Older factories (v0.8.x) have no
// such route; that is reported as ErrSchematicLookupUnsupported, an unknown
// ID as ErrUnknownSchematic.
func (c *Client) Schematic(ctx context.Context, id string) (*schematic.Schematic, error) {
	if !IsSchematicID(id) {
		return nil, fmt.Errorf("schematic %q: an ID is 64 lowercase hex digits", id)
	}

	var raw []byte

	err := c.do(ctx, http.MethodGet, "/schematics/"+id, nil, &raw, http.StatusOK)

	var he *HTTPError
	if errors.As(err, &he) {
		switch {
		case he.Status == http.StatusMethodNotAllowed,
			he.Status == http.StatusNotFound && strings.EqualFold(he.Body, "404 page not found"):
			// A router's generic "no such route" rather than a lookup miss.
			return nil, fmt.Errorf("schematic %s: %w", id, ErrSchematicLookupUnsupported)
		case he.Status == http.StatusNotFound:
			return nil, fmt.Errorf("schematic %s: %w (%w)", id, ErrUnknownSchematic, err)
		}
	}

	if err != nil {
		return nil, fmt.Errorf("schematic %s: %w", id, err)
	}

	s, err := schematic.Unmarshal(raw)
	if err != nil {
		return nil, fmt.Errorf("schematic %s: %w: %v", id, ErrBadResponse, err)
	}

	if got, err := s.ID(); err != nil || got != id {
		return nil, fmt.Errorf("schematic %s: %w: the returned schematic has ID %s", id, ErrBadResponse, got)
	}

	return s, nil
}

// Versions lists the Talos versions the factory offers.
func (c *Client) Versions(ctx context.Context) ([]string, error) {
	var v []string
	if err := c.do(ctx, http.MethodGet, "/versions", nil, &v, http.StatusOK); err != nil {
		return nil, fmt.Errorf("list Talos versions: %w", err)
	}

	return v, nil
}

// Extensions lists the official extensions for a Talos version.
func (c *Client) Extensions(ctx context.Context, version string) ([]ExtensionInfo, error) {
	var v []ExtensionInfo
	if err := c.versionCall(ctx, version, "extensions", &v); err != nil {
		return nil, fmt.Errorf("list extensions for %s: %w", version, err)
	}

	return v, nil
}

// Overlays lists the official overlays for a Talos version.
func (c *Client) Overlays(ctx context.Context, version string) ([]OverlayInfo, error) {
	var v []OverlayInfo
	if err := c.versionCall(ctx, version, "overlays", &v); err != nil {
		return nil, fmt.Errorf("list overlays for %s: %w", version, err)
	}

	return v, nil
}

func (c *Client) versionCall(ctx context.Context, version, what string, out any) error {
	if err := ValidateVersion(version); err != nil {
		return err
	}

	err := c.do(ctx, http.MethodGet, "/version/"+version+"/"+what+"/official", nil, out, http.StatusOK)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w %s (%w)", ErrUnknownVersion, version, err)
	}

	return err
}

// ValidateProfile checks against the factory that the profile's Talos
// version exists and that its overlay and every extension are offered for
// that version. Unknown names come with close matches.
func (c *Client) ValidateProfile(ctx context.Context, p Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}

	version := p.Version()

	versions, err := c.Versions(ctx)
	if err != nil {
		return err
	}

	if !slices.Contains(versions, version) {
		return fmt.Errorf("profile %q: %w %s at %s (%s)", p.Name, ErrUnknownVersion, version, c.BaseURL(), describeVersions(versions, version))
	}

	if len(p.Extensions) > 0 {
		exts, err := c.Extensions(ctx, version)
		if err != nil {
			return err
		}

		names := make([]string, len(exts))
		for i, e := range exts {
			names[i] = e.Name
		}

		var problems []string

		for _, want := range p.Extensions {
			if slices.Contains(names, want) {
				continue
			}

			msg := fmt.Sprintf("%q", want)
			if near := closeMatches(want, names); len(near) > 0 {
				msg += " (did you mean " + strings.Join(near, " or ") + "?)"
			}

			problems = append(problems, msg)
		}

		if len(problems) > 0 {
			return fmt.Errorf("profile %q: %w for Talos %s: %s", p.Name, ErrUnknownExtension, version, strings.Join(problems, ", "))
		}
	}

	if p.Overlay.Name != "" {
		overlays, err := c.Overlays(ctx, version)
		if err != nil {
			return err
		}

		var names []string

		for _, o := range overlays {
			if o.Name == p.Overlay.Name && o.Image == p.Overlay.Image {
				return nil
			}

			if o.Name == p.Overlay.Name {
				return fmt.Errorf("profile %q: %w: overlay %q comes from image %q, not %q", p.Name, ErrUnknownOverlay, o.Name, o.Image, p.Overlay.Image)
			}

			names = append(names, o.Name)
		}

		hint := ""
		if near := closeMatches(p.Overlay.Name, names); len(near) > 0 {
			hint = " (did you mean " + strings.Join(near, " or ") + "?)"
		}

		return fmt.Errorf("profile %q: %w %q for Talos %s%s", p.Name, ErrUnknownOverlay, p.Overlay.Name, version, hint)
	}

	return nil
}

func describeVersions(versions []string, want string) string {
	if len(versions) == 0 {
		return "it offers none"
	}
	// Versions are compared as versions, not as text: the newest offered,
	// and the newest of the release line asked for (v1.14.x for v1.14.9).
	w, werr := semver.ParseTolerant(want)
	var newest, line *semver.Version
	var newestS, lineS string
	for _, v := range versions {
		sv, err := semver.ParseTolerant(v)
		if err != nil || len(sv.Pre) > 0 {
			continue
		}
		if newest == nil || sv.GT(*newest) {
			newest, newestS = &sv, v
		}
		if werr == nil && sv.Major == w.Major && sv.Minor == w.Minor && (line == nil || sv.GT(*line)) {
			line, lineS = &sv, v
		}
	}
	switch {
	case newest == nil:
		return "newest: " + versions[len(versions)-1]
	case line != nil && lineS != newestS:
		return fmt.Sprintf("newest of v%d.%d: %s; newest: %s", w.Major, w.Minor, lineS, newestS)
	}
	return "newest: " + newestS
}

// closeMatches returns up to three candidates near name: same last path
// element, substring either way, or edit distance <= 3.
func closeMatches(name string, candidates []string) []string {
	short := name[strings.LastIndex(name, "/")+1:]

	var out []string

	for _, c := range candidates {
		cs := c[strings.LastIndex(c, "/")+1:]

		if cs == short || (len(short) >= 3 && strings.Contains(cs, short)) || (len(cs) >= 3 && strings.Contains(short, cs)) ||
			editdistance.Levenshtein(short, cs) <= 3 {
			out = append(out, c)
		}

		if len(out) == 3 {
			break
		}
	}

	return out
}

// do performs one metadata call. out is *[]byte for raw bodies, anything
// else is JSON-decoded.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any, okStatus ...int) error {
	if c.baseErr != nil {
		return c.baseErr
	}

	parent := ctx

	ctx, cancel := context.WithTimeout(parent, APITimeout)
	defer cancel()

	u := c.base.JoinPath(path).String()

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}

	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}

	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}

	req.Header.Set("Accept", "application/json")

	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(parent, ctx, method, u, unwrapURLError(err))
	}
	defer resp.Body.Close() //nolint:errcheck

	if resp.StatusCode >= 400 {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))

		return &HTTPError{Method: method, URL: u, Status: resp.StatusCode, Body: trimBody(text)}
	}

	if !slices.Contains(okStatus, resp.StatusCode) {
		return fmt.Errorf("%s %s: %w: HTTP %d", method, u, ErrBadResponse, resp.StatusCode)
	}

	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse+1))
	if err != nil {
		return c.transportError(parent, ctx, method, u, fmt.Errorf("reading reply: %w", err))
	}

	if len(data) > maxAPIResponse {
		return fmt.Errorf("%s %s: %w: reply larger than %d bytes", method, u, ErrBadResponse, maxAPIResponse)
	}

	if raw, ok := out.(*[]byte); ok {
		*raw = data

		return nil
	}

	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w: not the expected JSON (%v): %s", method, u, ErrBadResponse, err, trimBody(data))
	}

	return nil
}

// transportError names a failed exchange (no reply, or a reply cut off):
// the caller's own cancel stays its error, the rest is ErrUnreachable.
func (c *Client) transportError(parent, ctx context.Context, method, u string, err error) error {
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("%s %s: %w", method, u, perr) // the caller gave up
	}

	if ctx.Err() != nil {
		return fmt.Errorf("%w at %s: no answer within %s", ErrUnreachable, c.BaseURL(), APITimeout)
	}

	return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.BaseURL(), err)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}

	return err
}

// trimBody makes a server reply fit on one line of an error message.
func trimBody(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}

	if len(s) > maxErrorBody {
		cut := maxErrorBody
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}

		s = s[:cut] + "..."
	}

	return s
}
