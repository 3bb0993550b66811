package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/meta"
)

// What the parent encodes the child decodes; the child refuses keys a
// flash never writes (0x09 holds encryption settings) and oversize values.
func TestCardMetaEncoding(t *testing.T) {
	m := &CardMeta{Node: "worker-1", Address: "127.0.0.22/8", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte("hostnames: []")}, {Key: meta.UserReserved3, Value: []byte(`{"format":"talosflash/v1"}`)}}}
	got, err := DecodeCardMeta(m.Encode())
	if err != nil || got.Node != m.Node || got.Address != m.Address || len(got.Tags) != 2 || !bytes.Equal(got.Tags[0].Value, m.Tags[0].Value) || got.Tags[1].Key != meta.UserReserved3 {
		t.Fatalf("%+v %v", got, err)
	}
	bad := &CardMeta{Node: "x", Tags: []meta.Tag{{Key: meta.StateEncryptionConfig, Value: []byte("x")}}}
	if _, err := DecodeCardMeta(bad.Encode()); err == nil || !strings.Contains(err.Error(), "0x09") {
		t.Fatalf("0x09 accepted: %v", err)
	}
	big := &CardMeta{Node: "x", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: make([]byte, 300<<10)}}}
	if _, err := DecodeCardMeta(big.Encode()); err == nil {
		t.Fatal("oversize accepted")
	}
	if _, err := DecodeCardMeta("!!"); err == nil {
		t.Fatal("garbage accepted")
	}
}

// The head check refuses an image without META, and values too big for
// the store, before any card is opened.
func TestCheckHeadRefuses(t *testing.T) {
	job := Job{Meta: []*CardMeta{{Node: "worker-1", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte("x")}}}}}
	check := job.checkHead()
	if err := check(make([]byte, meta.HeadSize), -1); !errors.Is(err, ErrNoNodeMeta) {
		t.Fatalf("no GPT: %v", err)
	}
	if (&Job{}).checkHead() != nil {
		t.Fatal("a job without META checks the head")
	}
}
