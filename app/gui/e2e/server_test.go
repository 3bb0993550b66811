package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// newLoopbackServer serves h on 127.0.0.1 (httptest's default) until the test ends.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
