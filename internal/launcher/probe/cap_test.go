package probe

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// hugeReply serves a 10 MB answer that collapses into a loop at its end.
// The body is what json.Marshal makes of
//
//	{"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "length"}],
//	 "usage": {"completion_tokens": size / 4}}
//
// (keys sorted; the content needs no escapes), written into one buffer
// rather than built and then encoded, tens of MB of copying.
func hugeReply(size int) http.HandlerFunc {
	const sea, head, mid = "The sea is wide. ", `{"choices":[{"finish_reason":"length","message":{"content":"`, `","role":"assistant"}}],"usage":{"completion_tokens":`
	n := size / 17
	var b strings.Builder
	b.Grow(len(head) + n*len(sea) + 64 + len(mid) + 24)
	b.WriteString(head)
	for range n {
		b.WriteString(sea)
	}
	b.WriteString(strings.Repeat("!", 64))
	b.WriteString(mid)
	b.WriteString(strconv.Itoa(size/4) + "}}")
	return reply(b.String())
}

func TestHugeReplyIsCapped(t *testing.T) {
	srv := fakeServer(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": hugeReply(10 << 20)})
	o := runOne(t, srv, chatProbe(false, false))
	if o.ErrKind != "" {
		t.Fatalf("error %s: %s", o.ErrKind, o.Err)
	}
	if len(o.Text) > evidence.KeepHead+evidence.KeepTail+64 || o.TextBytes < 10<<20 {
		t.Errorf("kept %d bytes of a %d-byte answer", len(o.Text), o.TextBytes)
	}
	if !strings.HasPrefix(o.Text, "The sea is wide.") || !strings.HasSuffix(o.Text, "!!!!") || !strings.Contains(o.Text, "bmx cut") {
		t.Errorf("head, marker and tail must be kept: %q … %q", o.Text[:40], o.Text[len(o.Text)-40:])
	}
	line, _ := json.Marshal(o)
	if len(line) > 64<<10 {
		t.Errorf("the stored observation is %d bytes", len(line))
	}
}

// BenchmarkHugeReply reads a 10 MB reply; B/op is the memory it costs.
func BenchmarkHugeReply(b *testing.B) {
	t := &testing.T{}
	srv := fakeServer(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": hugeReply(10 << 20)})
	b.ReportAllocs()
	for range b.N {
		runOne(t, srv, chatProbe(false, false))
	}
}

// TestReplyOverTheCap: a reply longer than bmx reads of one (MaxReply) is
// not judged, and the observation says the cap was hit, not that the JSON
// was cut.
func TestReplyOverTheCap(t *testing.T) {
	srv := fakeServer(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": hugeReply(MaxReply + 1<<20)})
	o := runOne(t, srv, chatProbe(false, false))
	if o.ErrKind != evidence.Decode || !strings.Contains(o.Err, "over 16 MiB") || !strings.Contains(o.Err, "the most bmx reads of one reply") {
		t.Fatalf("error %q: %q", o.ErrKind, o.Err)
	}
	if o.HTTPStatus != http.StatusOK {
		t.Errorf("status %d", o.HTTPStatus)
	}
}
