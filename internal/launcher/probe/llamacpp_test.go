package probe

import (
	"path/filepath"
	"testing"
)

// TestLlamaCppExamplePerf reads the llama.cpp example's probe file: its
// [perf] is on, at concurrency 2, and fits the example's 256-token
// context. How Client.Perf measures a real engine with it (every request
// exactly the asked-for tokens by the engine's usage, cut at its length, a
// gap measured between most tokens, the prompt about as long as asked, at
// concurrency 1 and 2) is checked on real llama.cpp output where the engine
// already runs: cmd/bmx's TestLlamaCppSweep (live) and internal/record's
// TestLlamaCppRecorded (the whole example's recorded sweep), through
// llamacpptest's checkPerf. A server of its own here cost a node start
// (about 3.4 s of CPU) for the same checks; the client itself is tested
// against httptest servers and the sim in perf_test.go.
func TestLlamaCppExamplePerf(t *testing.T) {
	set, err := LoadFile(filepath.Join("..", "..", "..", "examples", "llamacpp", "probes.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := set.Perf
	if !cfg.Enabled || cfg.Concurrency != 2 || !cfg.IgnoreEOS || cfg.PromptTokens+cfg.OutputTokens > 256 {
		t.Fatalf("the example's [perf] %+v: want it on, ignoring EOS, at concurrency 2, within the 256-token context", cfg)
	}
}
