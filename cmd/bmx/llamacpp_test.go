package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/llamacpptest"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestLlamaCppSweep sweeps a real inference engine (llama.cpp on CPU through
// node-llama-cpp) with a real trained model end to end: a part of the
// example (--only: flash attention off, K cache f16, f32 or q8_0, V cache
// f16; 3 cells: 2 correct and measured, 1 garbage), each verdict checked
// against what the engine really does, and the sweep's performance
// section. The engine's crash (a quantized K cache with flash attention
// fails to create its context) is judged from the recorded sweep's real
// output by TestLlamaCppRecorded: each cell here costs a node start of
// about 2 s of CPU, and a crash at start is what the sim's cells show of
// a live process. The example's config, its server and its probes, asking for fewer
// tokens (cheapConfig): what the engine does with each cache type shows
// within 32 tokens a probe, and the shipped token counts are the recorded
// sweep's. Then bmx report
// --rejudge, as a process, judges the same outputs again with the garbage
// cell configured as the reference: the healthy cells are still correct,
// the agreeing cells are the yardstick, and the report says the reference
// failed. The whole example's 20 cells, the degraded threshold's
// calibration among them, are checked on a recorded sweep of it by
// internal/record's TestLlamaCppRecorded.
func TestLlamaCppSweep(t *testing.T) {
	t.Parallel()
	dir, model := llamacpptest.Ready(t)
	const shipped = "flash_attn=off,cache_k=f16,cache_v=f16"
	out := t.TempDir()
	code, stdout, stderr := bmx(t, "sweep", "-c", cheapConfig(t, dir), "--var", "model="+model, "--slots", "2", "--out", out, "-q",
		"--only", "flash_attn=off", "--only", "cache_v=f16", "--only", "cache_k=f16", "--only", "cache_k=f32", "--only", "cache_k=q8_0")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	run := runDir(t, out)
	rep := llamaReportOf(t, mustRead(t, filepath.Join(run, "report.json")))
	verdicts := map[classify.Verdict]int{}
	for _, c := range rep.Cells {
		verdicts[c.Verdict]++
	}
	if len(rep.Cells) != 3 || verdicts[classify.Correct] != 2 || verdicts[classify.Garbage] != 1 {
		t.Errorf("%d cells, %v; want 3: 2 correct, 1 garbage", len(rep.Cells), verdicts)
	}
	if rep.Run.Reference != shipped || rep.Agreement == nil || rep.Agreement.Yardstick != shipped || rep.Agreement.Status != classify.RefConfirmed {
		t.Errorf("reference %q, agreement %+v: want the shipped reference, vouched for", rep.Run.Reference, rep.Agreement)
	}
	llamacpptest.CheckCellsPerf(t, rep.Cells, shipped, cheapPerf)
	// The sweep's output has the performance table of the correct cells
	// and either crowns one or says they are within noise.
	if !strings.Contains(stdout, "performance: streamed chat completions, 64-token prompt, 32 tokens out") ||
		!strings.Contains(stdout, "fastest correct cell") && !strings.Contains(stdout, "within noise") {
		t.Errorf("no performance section or recommendation:\n%s", stdout)
	}

	// The same engine outputs, with the garbage cell named as the
	// reference: bmx report --rejudge judges every cell again from its
	// recorded evidence, without sweeping the engine a second time.
	const garbage = "flash_attn=off,cache_k=q8_0,cache_v=f16"
	var meta map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(run, "run.json")), &meta); err != nil {
		t.Fatal(err)
	}
	meta["reference"] = garbage
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "run.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, js, stderr := bmx(t, "report", run, "--rejudge", "--format", "json")
	if code != ExitOK {
		t.Fatalf("report --rejudge: exit %d\n%s", code, stderr)
	}
	rep = llamaReportOf(t, []byte(js))
	a := rep.Agreement
	if rep.Run.Reference != garbage || a == nil || a.Status != classify.RefBroken || a.Yardstick == garbage || a.Yardstick == "" {
		t.Fatalf("reference %q, agreement %+v: want the garbage reference replaced by the agreeing cells", rep.Run.Reference, a)
	}
	if _, table, _ := bmx(t, "report", run, "--rejudge"); !strings.Contains(table, "failed, so it is no yardstick") {
		t.Errorf("the report does not say the reference failed:\n%s", table)
	}
	llamacpptest.CheckCellsPerf(t, rep.Cells, a.Yardstick, cheapPerf)
}

// cheapPerf is the [perf] cheapConfig asks for: 2 requests alone and 2 at
// once, 32 tokens out each (the example: 4 and 128).
var cheapPerf = llamacpptest.Perf{Requests: 2, OutputTokens: 32}

// cheapConfig writes the example's matrix.toml and probes.toml, as shipped
// but for the tokens asked for (each probe 32 tokens, not 96; [perf]
// cheapPerf), into a temporary directory, with the example's server, and
// returns the config's path. Each edit must find its text in the example.
func cheapConfig(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	edit := func(file string, edits ...[3]string) {
		t.Helper()
		s := string(mustRead(t, filepath.Join(dir, file)))
		for _, e := range edits {
			if n := strings.Count(s, e[0]); strconv.Itoa(n) != e[2] {
				t.Fatalf("%s: %d of %q, want %s", file, n, e[0], e[2])
			}
			s = strings.ReplaceAll(s, e[0], e[1])
		}
		if err := os.WriteFile(filepath.Join(out, file), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit("matrix.toml", [3]string{`"{dir}/server.mjs"`, strconv.Quote(filepath.Join(dir, "server.mjs")), "1"})
	edit("probes.toml",
		[3]string{"\nmax_tokens = 96\n", "\nmax_tokens = 32\n", "3"},
		[3]string{"\noutput_tokens = 128\n", "\noutput_tokens = " + strconv.Itoa(cheapPerf.OutputTokens) + "\n", "1"},
		[3]string{"\nrequests = 4\n", "\nrequests = " + strconv.Itoa(cheapPerf.Requests) + "\n", "1"})
	return filepath.Join(out, "matrix.toml")
}

// llamaReport is what the llama.cpp test reads of a report.json.
type llamaReport struct {
	Run       record.Run          `json:"run"`
	Cells     []record.Result     `json:"cells"`
	Agreement *classify.Agreement `json:"agreement"`
}

func llamaReportOf(t *testing.T, data []byte) llamaReport {
	t.Helper()
	var rep llamaReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestLlamaCppServerFlags(t *testing.T) {
	t.Parallel()
	dir, _ := llamacpptest.Ready(t)
	cmd := exec.Command("node", filepath.Join(dir, "server.mjs"), "-m", "x.gguf", "--n-gpu-layers", "99")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "usage: server.mjs") || !strings.Contains(string(out), "invalid argument: --n-gpu-layers") {
		t.Errorf("err %v\n%s", err, out)
	}
}
