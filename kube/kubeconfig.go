// Package kube is talosflash's Kubernetes side: the cluster's admin
// kubeconfig merged into the user's kubeconfig the way `talosctl
// kubeconfig` does it, each node's Ready condition read through the
// Kubernetes API, and the rolling upgrade's cordon and drain; client-go's
// clientcmd and REST client over a scheme of core/v1 and policy/v1 only
// (client.go). A kubeconfig holds a client key: nothing here prints, logs
// or quotes one, and files are written 0600.
package kube

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/talosflash/talosflash/internal/userfile"
)

// MaxKubeconfigSize bounds a kubeconfig read from disk.
const MaxKubeconfigSize = 16 << 20

// ErrKubeconfig marks a kubeconfig that cannot be used.
var ErrKubeconfig = errors.New("unusable kubeconfig")

// Parse loads a kubeconfig with clientcmd. Its errors never quote the file
// (YAML errors may quote a value: only the line is kept).
func Parse(data []byte) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		where := ""
		if m := lineRe.FindStringSubmatch(err.Error()); m != nil {
			where = " (line " + m[1] + ")"
		}
		return nil, fmt.Errorf("%w: not a valid kubeconfig%s", ErrKubeconfig, where)
	}
	return cfg, nil
}

var lineRe = regexp.MustCompile(`line (\d+)`)

// DefaultPath is the file `talosctl kubeconfig` merges into: the first
// file of $KUBECONFIG when set, else ~/.kube/config. (talosctl refuses a
// $KUBECONFIG of several files, go-kubeconfig SinglePath; kubectl's own
// writes go to the first of them that exists.)
func DefaultPath() (string, error) {
	if list := filepath.SplitList(os.Getenv("KUBECONFIG")); len(list) > 0 && list[0] != "" {
		return list[0], nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: no home directory for ~/.kube/config: %w", err)
	}
	return filepath.Join(home, ".kube", "config"), nil
}

// LoadFile reads a kubeconfig file (bounded, a regular file). exists is
// false, with no error, when there is no file.
func LoadFile(path string) (cfg *clientcmdapi.Config, exists bool, err error) {
	data, err := userfile.Read(path, MaxKubeconfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err = Parse(data)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, true, nil
}

// Rename is one entry of the new kubeconfig stored under another name
// because the file already had a different one by that name.
type Rename struct{ Kind, From, To string } // Kind: cluster, user, context

// MergeResult says what Merge did.
type MergeResult struct {
	Context     string   // the merged context, now current
	Renamed     []Rename // conflicts kept apart (the default)
	Overwritten []string // conflicts replaced (Force), "cluster homelab" ...
}

// Merge adds src's clusters, users and contexts to dst and makes src's
// current context dst's current one, as talosctl kubeconfig does
// (siderolabs/go-kubeconfig merge.go, non-interactive): an entry equal to
// one already there is reused; a different one of the same name is renamed
// name-1, name-2, ... (force: overwritten). Talos names the user and the
// context admin@<cluster>, so a renamed cluster renames them alike
// (admin@homelab-1). Unlike go-kubeconfig v0.1.0, a context is checked
// against contexts (it compares it with clusters).
func Merge(dst, src *clientcmdapi.Config, force bool) MergeResult {
	if dst.Clusters == nil {
		dst.Clusters = map[string]*clientcmdapi.Cluster{}
	}
	if dst.AuthInfos == nil {
		dst.AuthInfos = map[string]*clientcmdapi.AuthInfo{}
	}
	if dst.Contexts == nil {
		dst.Contexts = map[string]*clientcmdapi.Context{}
	}
	var res MergeResult
	clusters, users := map[string]string{}, map[string]string{}
	renameIn := func(name string, renames map[string]string) string {
		for _, from := range slices.Sorted(maps.Keys(renames)) {
			if to := renames[from]; to != from {
				name = strings.ReplaceAll(name, from, to)
			}
		}
		return name
	}
	for _, name := range slices.Sorted(maps.Keys(src.Clusters)) {
		c := src.Clusters[name]
		clusters[name] = place(&res, "cluster", name, name, c, dst.Clusters, force)
	}
	for _, name := range slices.Sorted(maps.Keys(src.AuthInfos)) {
		u := src.AuthInfos[name]
		users[name] = place(&res, "user", name, renameIn(name, clusters), u, dst.AuthInfos, force)
	}
	for _, name := range slices.Sorted(maps.Keys(src.Contexts)) {
		c := *src.Contexts[name]
		c.LocationOfOrigin = ""
		if to, ok := clusters[c.Cluster]; ok {
			c.Cluster = to
		}
		if to, ok := users[c.AuthInfo]; ok {
			c.AuthInfo = to
		}
		to := place(&res, "context", name, renameIn(name, users), &c, dst.Contexts, force)
		if name == src.CurrentContext || res.Context == "" {
			res.Context = to
		}
	}
	if res.Context != "" {
		dst.CurrentContext = res.Context
	}
	return res
}

// place stores v in m under want, or want-N when m holds another value
// under want (unless force), and records what it did.
func place[T any](res *MergeResult, kind, from, want string, v *T, m map[string]*T, force bool) string {
	clearOrigin(v)
	name := want
	if old, ok := m[want]; ok {
		clearOrigin(old)
		switch {
		case reflect.DeepEqual(old, v):
		case force:
			res.Overwritten = append(res.Overwritten, kind+" "+want)
		default:
			for i := 1; ; i++ {
				name = want + "-" + strconv.Itoa(i)
				if _, taken := m[name]; !taken {
					break
				}
			}
		}
	}
	if name != from {
		res.Renamed = append(res.Renamed, Rename{Kind: kind, From: from, To: name})
	}
	m[name] = v
	return name
}

func clearOrigin(v any) {
	switch x := v.(type) {
	case *clientcmdapi.Cluster:
		x.LocationOfOrigin = ""
	case *clientcmdapi.AuthInfo:
		x.LocationOfOrigin = ""
	case *clientcmdapi.Context:
		x.LocationOfOrigin = ""
	}
}

// Server is the API server URL of a context's cluster.
func Server(cfg *clientcmdapi.Config, context string) (string, error) {
	c, err := clusterOf(cfg, context)
	if err != nil {
		return "", err
	}
	return c.Server, nil
}

// SetServer points a context's cluster at server.
func SetServer(cfg *clientcmdapi.Config, context, server string) error {
	c, err := clusterOf(cfg, context)
	if err != nil {
		return err
	}
	c.Server = server
	return nil
}

func clusterOf(cfg *clientcmdapi.Config, context string) (*clientcmdapi.Cluster, error) {
	if context == "" {
		context = cfg.CurrentContext
	}
	ctx, ok := cfg.Contexts[context]
	if !ok || ctx == nil {
		return nil, fmt.Errorf("%w: no context %q", ErrKubeconfig, context)
	}
	c, ok := cfg.Clusters[ctx.Cluster]
	if !ok || c == nil {
		return nil, fmt.Errorf("%w: context %q names cluster %q, which is not in the file", ErrKubeconfig, context, ctx.Cluster)
	}
	return c, nil
}

// WriteFile writes cfg to path, 0600, atomically (a temporary file in the
// same directory, synced, renamed over it), through a symlink to the file
// it points at; a missing directory is created 0700.
func WriteFile(path string, cfg *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig: encode: %w", err)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".talosflash-*")
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("kubeconfig: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("kubeconfig: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	ok = true
	return nil
}
