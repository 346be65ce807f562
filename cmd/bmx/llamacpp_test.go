package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/reports"
)

// llamacppReady returns the example server's directory, or skips (fails in
// CI, where .ci/run installs node's dependencies) when node or the
// dependencies or the model are missing.
func llamacppReady(t *testing.T) (dir, model string) {
	t.Helper()
	dir, _ = filepath.Abs(filepath.Join("..", "..", "examples", "llamacpp"))
	model, _ = filepath.Abs(filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf"))
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-llama-cpp")); err != nil {
		missing = "node dependencies are not installed (cd examples/llamacpp && npm ci --omit=optional)"
	} else if _, err := os.Stat(model); err != nil {
		missing = "the model is not at " + model
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("the real-engine test must run in CI: %s", missing)
		}
		t.Skip(missing)
	}
	return dir, model
}

// TestLlamaCppSweep sweeps a real inference engine (llama.cpp on CPU through
// node-llama-cpp) with a real trained model, and checks each verdict against
// what the engine really does.
func TestLlamaCppSweep(t *testing.T) {
	dir, model := llamacppReady(t)
	out := t.TempDir()
	code, stdout, stderr := bmx(t, "sweep", "-c", filepath.Join(dir, "matrix.toml"), "--var", "model="+model, "--slots", "2", "--out", out, "-q")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	data := mustRead(t, filepath.Join(runDir(t, out), "report.json"))
	var rep struct {
		Cells []reports.Result `json:"cells"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 16 {
		t.Fatalf("%d cells", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		fa, _ := c.Cell.Value("flash_attn")
		k, _ := c.Cell.Value("cache_k")
		v, _ := c.Cell.Value("cache_v")
		quantK, quantV := strings.HasPrefix(k, "q"), strings.HasPrefix(v, "q")
		var want classify.Verdict
		var sig string
		switch {
		case quantV && fa == "off":
			want, sig = classify.Crash, "quantized V cache requires flash_attn to be enabled"
		case quantK && fa == "on":
			want, sig = classify.Crash, "K cache type "+k+" with block size 32 does not divide n_embd_head_k=8"
		case quantV && fa == "on":
			want, sig = classify.Crash, "V cache type "+v+" with block size 32 does not divide n_embd_head_v=8"
		case quantK:
			want = classify.Garbage
		default:
			want = classify.Correct
		}
		if c.Verdict != want || !strings.Contains(c.Signature, sig) {
			t.Errorf("%s: %s %q (%s), want %s %q", c.Cell.ID, c.Verdict, c.Signature, c.Reason, want, sig)
		}
		if want == classify.Garbage && !strings.Contains(c.Reason, "the reference cell flash_attn=off,cache_k=f16,cache_v=f16 answered") {
			t.Errorf("%s: the garbage is not set against the reference: %s", c.Cell.ID, c.Reason)
		}
	}
}

func TestLlamaCppServerFlags(t *testing.T) {
	dir, _ := llamacppReady(t)
	cmd := exec.Command("node", filepath.Join(dir, "server.mjs"), "-m", "x.gguf", "--n-gpu-layers", "99")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "usage: server.mjs") || !strings.Contains(string(out), "invalid argument: --n-gpu-layers") {
		t.Errorf("err %v\n%s", err, out)
	}
}
