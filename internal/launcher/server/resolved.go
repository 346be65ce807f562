package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

// serverInfoTimeout bounds /get_server_info, which only reads a dict: a
// server that is slow to answer it does not say, and the cell goes on.
const serverInfoTimeout = 5 * time.Second

// Bounds of what is read to find the resolved backends.
const (
	// serverInfoMax bounds /get_server_info's JSON: SGLang's is a few KiB.
	serverInfoMax = 4 << 20
	// resolvedLogMax is how much of a log is searched for "Using X
	// backend" lines: engines print them while loading, near the start.
	resolvedLogMax = 16 << 20
)

// Resolved is what a ready server says it resolved its backends to: the
// "*_backend" strings of SGLang's /get_server_info, and each "Using X ...
// backend" line of its log as "log:<what>_backend". It is nil when the
// server says nothing.
func (s *Server) Resolved(ctx context.Context) map[string]string {
	out := resolvedBackends(ctx, s.Client(0), s.URL())
	for k, v := range resolvedFromLog(s.spec.Log.Name()) {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// resolvedBackends reads what the server resolved its backends to (SGLang's
// /get_server_info); nil when the server does not say.
func resolvedBackends(ctx context.Context, client *http.Client, base string) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, serverInfoTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/get_server_info", nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var info map[string]any
	if json.NewDecoder(io.LimitReader(resp.Body, serverInfoMax)).Decode(&info) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range info {
		if sv, ok := v.(string); ok && strings.HasSuffix(k, "_backend") {
			out[k] = sv
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// usingBackendRe matches vLLM's "Using FLASHINFER_CUTLASS Fp8 MoE backend
// out of potential backends: [...]" style lines.
var usingBackendRe = regexp.MustCompile(`\bUsing ([A-Za-z0-9_]+) ((?:[A-Za-z0-9]+ ){0,3})backend\b`)

// resolvedFromLog reads the backends an engine says it chose in its log
// ("Using X ... backend"), keyed by what they are for ("fp8_moe_backend").
func resolvedFromLog(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(f, resolvedLogMax))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := usingBackendRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(m[2]), " ", "_"))
		if key == "" {
			key = "backend"
		} else {
			key += "_backend"
		}
		out["log:"+key] = m[1]
	}
	return out
}
