package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// diffConfigRunsDir holds the recorded runs TestDiffConfig compares: base
// and next, one cell each of two configs of the simulated host that
// differ in many ways (diffConfigRuns makes them with -update).
var diffConfigRunsDir = filepath.Join("testdata", "diffconfig")

// The secrets the two configs pass in the server's environment: no
// report may print them.
const (
	diffOldToken = "hf_AAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	diffNewToken = "hf_BBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	diffAPIKey   = "sk-CCCCCCCCCCCCCCCCCCCCCCCC"
)

// diffSimConfig is a small config of the simulated host (bmx sim-server as
// the server), with the parts TestDiffConfig changes filled in; head and
// tail are written first and last.
func diffSimConfig(moe, fp4 []string, watchdog string, env map[string]string, tp, head, tail string) string {
	return matrixtest.Config{Name: "diffcfg", Head: head,
		Vars: map[string]string{"model": "simulated/Qwen3.5-397B-A17B-NVFP4", "tp": tp},
		Server: matrixtest.Server{
			Command: []string{"{self}", "sim-server", "--model-path", "{model}", "--host", "{host}", "--port", "{port}", "--tp", "{tp}",
				"--reasoning-parser", "qwen3", "--trust-remote-code", "--watchdog-timeout", watchdog},
			Env:          env,
			ReadyTimeout: "6s", ProbeTimeout: "20s", StopGrace: "1s",
			ReadyLog: "fired up and ready to roll",
		},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: moe},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: fp4},
		},
		Tail: tail + `[[known]]
match = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cutlass" }
verdict = "nan"
`,
	}.String()
}

// diffConfigRuns builds bmx and sweeps one cell (cutlass x cudnn) of each
// of two configs that differ in an axis value each way, a server flag,
// the server's environment (a secret among it), a var, an exclude, the
// reference cell and a known issue; it records the run directories as
// out/base and out/next, replacing what was there (recordRunDir).
func diffConfigRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	trtllmKnown := "[[known]]\nmatch = { moe_runner = \"flashinfer_trtllm\" }\nverdict = \"crash\"\n"
	configs := map[string]string{
		"base": diffSimConfig(
			[]string{"flashinfer_cutlass", "flashinfer_trtllm"}, []string{"flashinfer_cudnn", "flashinfer_cutlass"}, "30",
			map[string]string{"HF_TOKEN": diffOldToken, "KEEP": "1"}, "8",
			`reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cudnn" }`, trtllmKnown),
		"next": diffSimConfig(
			[]string{"flashinfer_cutlass"}, []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl"}, "60",
			map[string]string{"HF_TOKEN": diffNewToken, "KEEP": "2", "API_KEY": diffAPIKey}, "4",
			`reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cutlass" }`,
			"[[exclude]]\nmoe_runner = \"flashinfer_cutlass\"\nfp4_gemm = \"flashinfer_cutedsl\"\n"),
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"base", "next"} {
		cfg := filepath.Join(work, name+".toml")
		if err := os.WriteFile(cfg, []byte(configs[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		runs := filepath.Join(work, name)
		cmd := exec.Command(bmx, "sweep", "-c", cfg, "--out", runs, "-q", "--only", "moe_runner=flashinfer_cutlass", "--only", "fp4_gemm=flashinfer_cudnn")
		b, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || (cmd.ProcessState.ExitCode() != 0 && cmd.ProcessState.ExitCode() != 1) {
			t.Fatalf("sweep %s: %v\n%s", name, err, b)
		}
		dirs, _ := filepath.Glob(filepath.Join(runs, "*"))
		if len(dirs) != 1 {
			t.Fatalf("%d run directories under %s, want 1", len(dirs), runs)
		}
		recordRunDir(t, dirs[0], filepath.Join(out, name))
	}
}

// TestDiffConfig compares the recorded runs of two configs of the
// simulated host (testdata/diffconfig; go test ./internal/reports -run
// TestDiffConfig -update sweeps them again) that differ in an axis value
// each way, a server flag, the server's environment (a secret among it), a
// var, an exclude, the reference cell and a known issue: the diff names
// each change, and nothing else, in every format, without printing a
// secret; a run against itself says the config is unchanged.
func TestDiffConfig(t *testing.T) {
	t.Parallel()
	if *update {
		diffConfigRuns(t, diffConfigRunsDir)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(diffConfigRunsDir)); err != nil {
		t.Fatal(err)
	}
	// The sweeps wrote none of the secrets into their run directories
	// (run.json's config and env, results, logs): the diff has none to
	// print. -update checks it of fresh sweeps.
	if err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		for _, secret := range []string{diffOldToken, diffNewToken, diffAPIKey} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds a secret of the config", path)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	base, err := record.Load(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatalf("%v (go test ./internal/reports -run TestDiffConfig -update makes the runs)", err)
	}
	next, err := record.Load(filepath.Join(dir, "next"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"config: axis moe_runner: - flashinfer_trtllm",
		"config: axis fp4_gemm: + flashinfer_cutedsl",
		"config: server.command: - --watchdog-timeout 30",
		"config: server.command: + --watchdog-timeout 60",
		"config: server.env: + API_KEY=<redacted>",
		"config: server.env: KEEP=1 -> KEEP=2",
		"config: exclude: + fp4_gemm=flashinfer_cutedsl,moe_runner=flashinfer_cutlass",
		"config: reference: fp4_gemm=flashinfer_cudnn,moe_runner=flashinfer_cutlass -> fp4_gemm=flashinfer_cutlass,moe_runner=flashinfer_cutlass",
		"config: vars: tp=8 -> tp=4",
		"config: known: - moe_runner=flashinfer_trtllm: crash",
	}
	unescape := strings.NewReplacer(`\_`, "_", "&gt;", ">", "&lt;", "<")
	configLines := func(out, prefix string) []string {
		var got []string
		for _, l := range strings.Split(unescape.Replace(out), "\n") {
			if l, ok := strings.CutPrefix(l, prefix); ok && strings.HasPrefix(l, "config: ") {
				got = append(got, l)
			}
		}
		return got
	}
	formats := map[string]func(*bytes.Buffer, *Diff) error{
		"table": func(w *bytes.Buffer, d *Diff) error { return DiffTable(w, d) },
		"md":    func(w *bytes.Buffer, d *Diff) error { return DiffMarkdown(w, d) },
		"json":  func(w *bytes.Buffer, d *Diff) error { return DiffJSON(w, d) },
	}
	render := func(format string, a, b *record.Report) string {
		t.Helper()
		var w bytes.Buffer
		if err := formats[format](&w, Compare(a, b)); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		return w.String()
	}
	outs := map[string]string{}
	for format := range formats {
		outs[format] = render(format, base, next)
		for _, secret := range []string{diffOldToken, diffNewToken, diffAPIKey} {
			if strings.Contains(outs[format], secret) {
				t.Errorf("the %s diff prints a secret", format)
			}
		}
	}
	if diff := cmp.Diff(want, configLines(outs["table"], "")); diff != "" {
		t.Errorf("table: config lines (-want +got):\n%s\n%s", diff, outs["table"])
	}
	if diff := cmp.Diff(want, configLines(outs["md"], "- ")); diff != "" {
		t.Errorf("md: config lines (-want +got):\n%s\n%s", diff, outs["md"])
	}
	var d Diff
	if err := json.Unmarshal([]byte(outs["json"]), &d); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Config {
		got = append(got, c.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("json: config changes (-want +got):\n%s", diff)
	}
	if len(d.ConfigNotes) != 0 {
		t.Errorf("notes: %q", d.ConfigNotes)
	}

	// A run against itself: nothing changed, and it says so.
	for format, prefix := range map[string]string{"table": "", "md": "- "} {
		out := render(format, base, base)
		if got := configLines(out, prefix); !cmp.Equal(got, []string{"config: unchanged"}) {
			t.Errorf("%s: same run: %q\n%s", format, got, out)
		}
	}
	if out := render("json", base, base); !strings.Contains(out, `"config": []`) {
		t.Errorf("json: same run:\n%s", out)
	}
}
