package factorytest

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// InstallerDigest is the digest the fake registry gives the installer
// repository/schematic:version (deterministic, so tests can expect it).
func InstallerDigest(repository, schematicID, version string) string {
	sum := sha256.Sum256([]byte(repository + "/" + schematicID + ":" + version))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// serveManifest is the factory's OCI registry front
// (internal/frontend/http/registry.go handleManifest): an installer of a
// registered schematic for an offered Talos version is "built" and answered
// with 307 to the storage registry by digest; an unknown schematic is 404
// "schematic not found", an unknown version the factory's version error.
// parts: v2, <repository>, <schematic>, manifests, <tag>.
func (s *Server) serveManifest(w http.ResponseWriter, r *http.Request, parts []string) {
	repo, id, tag := parts[1], parts[2], parts[4]
	if !strings.HasSuffix(repo, "installer") && !strings.HasSuffix(repo, "installer-secureboot") {
		http.Error(w, "invalid image: "+repo, http.StatusBadRequest)

		return
	}

	s.mu.Lock()
	_, known := s.schematics[id]
	okVersion := s.knownVersion(tag)
	s.mu.Unlock()

	switch {
	case !known:
		http.Error(w, "schematic not found", http.StatusNotFound)
	case strings.HasPrefix(tag, "v") && !okVersion:
		s.unknownVersion(w, tag)
	default:
		d := InstallerDigest(repo, id, tag)
		w.Header().Set("Location", s.URL+"/registry/v2/"+repo+"/"+id+"/manifests/"+d)
		w.WriteHeader(http.StatusTemporaryRedirect)
	}
}
