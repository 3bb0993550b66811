package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// The API types talosflash reads and writes: core/v1 (nodes, pods; with
// meta/v1's Status, lists and options, which AddToScheme registers with
// the group) and policy/v1 (Eviction). Not client-go's clientset
// (k8s.io/client-go/kubernetes): its scheme registers every API group at
// init, ~17 MiB resident in every run of the binary, flash or --help
// (docs/PERFORMANCE.md). Built on first use, so a run that never reaches
// a cluster pays nothing for it.
var codecs = sync.OnceValues(func() (serializer.CodecFactory, error) {
	s := runtime.NewScheme()
	if err := errors.Join(corev1.AddToScheme(s), policyv1.AddToScheme(s)); err != nil {
		return serializer.CodecFactory{}, fmt.Errorf("kubernetes API types: %w", err)
	}
	return serializer.NewCodecFactory(s), nil
})

// client is a REST client of the core API group (/api/v1) for a's
// context, configured as client-go's typed CoreV1 client
// (kubernetes/typed/core/v1 setConfigDefaults): JSON, the objects decoded
// as sent (no conversion), client-go's user agent, its default QPS.
// Requests to other paths (an eviction, a DaemonSet) use AbsPath.
func (a *Access) client() (*rest.RESTClient, error) {
	if a.rest == nil {
		return nil, fmt.Errorf("%w: no client configuration (kube.Open builds one)", ErrKubeconfig)
	}
	cf, err := codecs()
	if err != nil {
		return nil, err
	}
	cfg := *a.rest
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = cf.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientFor(&cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", a.Server, err)
	}
	return c, nil
}

// getNode is GET /api/v1/nodes/{name}.
func getNode(ctx context.Context, c *rest.RESTClient, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := c.Get().Resource("nodes").Name(name).Do(ctx).Into(n); err != nil {
		return nil, err
	}
	return n, nil
}

// getPod is GET /api/v1/namespaces/{namespace}/pods/{name}.
func getPod(ctx context.Context, c *rest.RESTClient, namespace, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	if err := c.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(p); err != nil {
		return nil, err
	}
	return p, nil
}
