package probe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/testenv"
)

// llamaServer starts the llama.cpp example server (node-llama-cpp on CPU,
// the real stories260K model) and returns a function that waits until it
// is ready and gives its URL; it skips, or fails in CI, when node, its
// dependencies or the model are missing. dir is the example's directory.
// Node and the model take seconds to load: a test can start the server,
// then t.Parallel(), and wait for it while the package's serial tests run.
func llamaServer(t *testing.T) (ready func() string, dir string) {
	t.Helper()
	dir, _ = filepath.Abs(filepath.Join("..", "..", "..", "examples", "llamacpp"))
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Skip(t, "the real-engine test needs node: it is not installed")
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-llama-cpp")); err != nil {
		testenv.Skip(t, "the real-engine test needs the example's node dependencies: not installed (cd examples/llamacpp && npm ci --omit=optional)")
	}
	model := testenv.Shared(t, "models", "stories260K.gguf")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var log bytes.Buffer
	cmd := exec.Command("node", filepath.Join(dir, "server.mjs"), "-m", model, "--port", fmt.Sprint(port), "-c", "256", "-t", "1")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	return func() string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			resp, err := http.Get(url + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return url
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the llama.cpp example did not become ready:\n%s", log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}, dir
}

// TestPerfLlamaCpp measures a real engine with the example's own [perf]
// settings: every request produces exactly the asked-for tokens
// (ignore_eos), counted by the engine's usage, at concurrency 1 and 2 (the
// example has one slot, so the second waits). Each level counts 2
// requests, not the example's 4: what is checked is each request, and 2
// at concurrency 2 still make the second wait. The server loads while the
// package's serial tests run.
func TestPerfLlamaCpp(t *testing.T) {
	ready, dir := llamaServer(t)
	t.Parallel()
	set, err := LoadFile(filepath.Join(dir, "probes.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := set.Perf
	if !cfg.Enabled || cfg.Concurrency != 2 || cfg.PromptTokens+cfg.OutputTokens > 256 {
		t.Fatalf("the example's [perf] %+v: want it on, at concurrency 2, within the 256-token context", cfg)
	}
	cfg.Requests = cfg.Concurrency
	c := &Client{BaseURL: ready(), Timeout: 30 * time.Second}
	p := c.Perf(context.Background(), cfg)
	if len(p.Problems) > 0 || len(p.Levels) != 2 || !p.IgnoreEOS {
		t.Fatalf("problems %q, %d levels", p.Problems, len(p.Levels))
	}
	if p.PromptTokensSeen < cfg.PromptTokens*3/4 || p.PromptTokensSeen > cfg.PromptTokens*5/4 {
		t.Errorf("prompt of %d tokens, asked %d", p.PromptTokensSeen, cfg.PromptTokens)
	}
	for _, l := range p.Levels {
		for _, r := range l.Runs {
			if !r.OK() || !r.Usage || r.OutputTokens != cfg.OutputTokens || r.FinishReason != "length" || len(r.ITLUS) < cfg.OutputTokens/2 {
				t.Errorf("concurrency %d: %+v", l.Concurrency, r)
			}
		}
		t.Logf("llama.cpp stories260K, concurrency %d: TTFT %.1f ms (p90 %.1f), TPOT %.2f ms, decode %.0f tok/s, %.0f tok/s per request incl. TTFT (%.0f-%.0f), %.0f tok/s in total",
			l.Concurrency, l.TTFTMS.Median, l.TTFTMS.P90, l.TPOTMS.Median, l.DecodeTokensPerSecond.Median, l.TokensPerSecond.Median, l.TokensPerSecond.Min, l.TokensPerSecond.Max, l.TotalTokensPerSecond)
	}
}
