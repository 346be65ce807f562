package reports

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

var update = flag.Bool("update", false, "rewrite golden files")

func cell(moe, fp4 string) matrix.Cell {
	return matrix.Cell{
		ID:     "moe=" + moe + ",fp4=" + fp4,
		Values: []matrix.AxisValue{{Axis: "moe", Value: moe}, {Axis: "fp4", Value: fp4}},
		Args:   []string{"--moe", moe, "--fp4", fp4},
	}
}

// fixture is a small run with one cell of each kind, and server text that
// tries to break every format.
func fixture() *record.Report {
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	hostile := "<script>alert(1)</script> | `rm -rf` \x1b[31mred\x1b[0m\nnew line " + strings.Repeat("long ", 60) + "\xff\xfe"
	res := func(c matrix.Cell, v classify.Verdict, reason, sig string, ready int64, obs ...evidence.Observation) record.Result {
		r := record.Result{
			Cell: c, Verdict: v, Reason: reason, Signature: sig, Observations: obs,
			Probes: []classify.ProbeVerdict{{Name: "say-ok", Verdict: v, Reason: reason}},
			Argv:   append([]string{"python3", "-m", "sglang.launch_server"}, c.Args...), Port: 30001,
			Repro:    "env CUDA_VISIBLE_DEVICES=0 python3 -m sglang.launch_server " + strings.Join(c.Args, " "),
			Resolved: map[string]string{"moe_runner_backend": c.Values[0].Value, "fp4_gemm_runner_backend": "flashinfer_cudnn"},
			LogPath:  "logs/" + c.ID + ".log", Timings: record.Timings{ReadyMS: ready, TotalMS: ready + 500},
			Started: t0, Ended: t0.Add(time.Second),
		}
		if obs == nil {
			r.Observations = []evidence.Observation{}
		}
		return r
	}
	return &record.Report{
		Run: &record.Run{
			Name: "fixture", BMXVersion: "test", ConfigPath: "m.toml", ProbeSet: "smoke",
			Reference: "moe=cutlass,fp4=cutlass",
			Known: []matrix.Known{
				{Match: map[string]string{"moe": "trtllm"}, Verdict: "crash", Issue: "https://example.org/issues/1"},
				{Match: map[string]string{"fp4": "cudnn", "moe": "cutlass"}, Verdict: "nan"},
				// The hang is known too; the garbage is not: a known crash
				// that answers garbage is news (CHANGED).
				{Match: map[string]string{"moe": "trtllm", "fp4": "cutlass"}, Verdict: "hang"},
			},
			Axes:     []record.AxisValues{{Name: "moe", Values: []string{"cutlass", "trtllm"}}, {Name: "fp4", Values: []string{"cudnn", "cutlass", "trtllm"}}},
			Cells:    5,
			Excluded: []matrix.Cell{cell("trtllm", "trtllm")},
			Host: record.Host{Hostname: "gpu-host", OS: "linux", Arch: "amd64", CPUs: 64, GPU: "NVIDIA H200", Driver: "580.159.04", CUDA: "13.0",
				GPUs:     []record.GPU{{Index: 0, Name: "NVIDIA H200", ComputeCap: "9.0", Driver: "580.159.04", MemoryMiB: 143771}},
				Versions: map[string]string{"torch": "2.12.0.dev20260310", "flashinfer-python": "0.6.5"}},
			Started: t0, Ended: t0.Add(time.Minute),
		},
		Results: []record.Result{
			withPerf(res(cell("cutlass", "cudnn"), classify.Correct, "all 6 probes answered as expected", "", 41200,
				evidence.Observation{Probe: "say-ok", Text: "OK", HTTPStatus: 200}), 100, 10),
			res(cell("cutlass", "cutlass"), classify.NaN, "the server was killed by SIGKILL, not sent by bmx (the server's own crash handling or the OOM killer) on NaN/inf in the logits", "probability tensor contains either `inf`, `nan` or element < 0", 40100),
			res(cell("cutlass", "trtllm"), classify.Crash, "the server process was killed by SIGKILL, not sent by bmx (the server's own crash handling or the OOM killer) before answering any probe", "CUDA error: no kernel image is available for execution on the device", 0),
			// Measured, and garbage: not in the performance table.
			withPerf(res(cell("trtllm", "cudnn"), classify.Garbage, "say-ok: "+hostile, "", 39000,
				evidence.Observation{Probe: "say-ok", Text: hostile, HTTPStatus: 200}), 500, 2),
			res(cell("trtllm", "cutlass"), classify.Hang, "the server was alive but did not answer in time", "stuck after: Capture cuda graph begin.", 0),
		},
	}
}

func golden(t *testing.T, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", t.Name()+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/reports -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

func render(t *testing.T, f func(*bytes.Buffer, *record.Report) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f(&buf, fixture()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTable(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return Table(b, r) })
	golden(t, out)
	if bytes.ContainsAny(out, "\x1b\xff") {
		t.Error("control or invalid bytes reached the terminal")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, "|", " "))
		if len(f) == 4 {
			rows[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if rows["cutlass"] != "correct nan crash" || rows["trtllm"] != "garbage hang excluded" {
		t.Errorf("grid rows %q", rows)
	}
	if !bytes.Contains(out, []byte("5 cells: 1 correct, 1 garbage, 1 nan, 1 hang, 1 crash (1 excluded)")) {
		t.Error("no summary line")
	}
}

func TestMarkdown(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return Markdown(b, r) })
	golden(t, out)
	s := string(out)
	if strings.Contains(s, "<script>") || strings.Contains(s, "\x1b") {
		t.Error("hostile text not escaped")
	}
	// Every table row keeps its header's column count: no cell text
	// broke out.
	header := 0
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = 0
			continue
		}
		n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|")
		if header == 0 {
			header = n
		} else if n != header {
			t.Errorf("row has %d pipes, its header %d: %s", n, header, line)
		}
	}
}

func TestJSON(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return JSON(b, r) })
	golden(t, out)
	var back struct {
		Run     record.Run               `json:"run"`
		Summary map[classify.Verdict]int `json:"summary"`
		Cells   []record.Result          `json:"cells"`
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Cells) != 5 || back.Summary[classify.Crash] != 1 || back.Cells[0].Observations[0].Text != "OK" {
		t.Errorf("round trip: %+v", back.Summary)
	}
	empty := render(t, func(b *bytes.Buffer, r *record.Report) error { r.Results = nil; return JSON(b, r) })
	if !bytes.Contains(empty, []byte(`"cells": []`)) {
		t.Error("no results must render as [] not null")
	}
}

func TestKnownStatusAndCauses(t *testing.T) {
	rep := fixture()
	want := map[string]string{
		"moe=cutlass,fp4=cudnn":   XPass,
		"moe=cutlass,fp4=cutlass": Unexpected,
		"moe=cutlass,fp4=trtllm":  Unexpected,
		"moe=trtllm,fp4=cudnn":    KnownChanged, // known to crash, garbage now
		"moe=trtllm,fp4=cutlass":  XFail,        // the second entry that matches expects the hang
	}
	for _, r := range rep.Results {
		if got, _ := Status(rep, r); got != want[r.Cell.ID] {
			t.Errorf("%s: %q, want %q", r.Cell.ID, got, want[r.Cell.ID])
		}
	}
	if st := statusText(rep, rep.Results[3]); st != "CHANGED (known crash, garbage now) https://example.org/issues/1" {
		t.Errorf("status text %q", st)
	}
	rep.Results = append(rep.Results, rep.Results[2])
	rep.Results[5].Cell = cell("trtllm", "trtllm")
	causes := Clusters(rep)
	if len(causes) != 3 || len(causes[0].Cells) != 2 || causes[0].Verdict != classify.Crash {
		t.Errorf("causes %+v", causes)
	}
	if p := ReferenceProblem(rep); !strings.Contains(p, "The reference cell moe=cutlass,fp4=cutlass is nan") {
		t.Errorf("reference problem %q", p)
	}
}

func TestGridThreeAxes(t *testing.T) {
	c := func(a, b, v string) matrix.Cell {
		return matrix.Cell{ID: a + b + v, Values: []matrix.AxisValue{{Axis: "fa", Value: a}, {Axis: "k", Value: b}, {Axis: "v", Value: v}}}
	}
	rep := &record.Report{
		Run: &record.Run{Axes: []record.AxisValues{{Name: "fa", Values: []string{"on", "off"}}, {Name: "k", Values: []string{"f16", "q8_0"}}, {Name: "v", Values: []string{"f16", "q8_0"}}}},
		Results: []record.Result{
			{Cell: c("on", "f16", "f16"), Verdict: classify.Correct},
			{Cell: c("off", "q8_0", "f16"), Verdict: classify.Garbage},
			{Cell: c("off", "q8_0", "q8_0"), Verdict: classify.Crash},
		},
	}
	g, ok := gridOf(rep)
	if !ok {
		t.Fatal("no grid")
	}
	if g.rowAxis != "fa,k" || g.colAxis != "v" || strings.Join(g.rows, " ") != "on,f16 off,q8_0" {
		t.Errorf("axes %q %q rows %q", g.rowAxis, g.colAxis, g.rows)
	}
	if g.at("off,q8_0", "q8_0") != "crash" || g.at("on,f16", "q8_0") != "-" {
		t.Errorf("cells %v", g.cells)
	}
}

// TestSummaryLineCountsEveryCell: the counts of the summary line add up to
// its total, skipped cells included.
func TestSummaryLineCountsEveryCell(t *testing.T) {
	rep := fixture()
	rep.Results = append(rep.Results, record.Result{Cell: cell("trtllm", "trtllm"), Verdict: classify.Skipped, Reason: "interrupted before it started"})
	if got, want := SummaryLine(rep), "6 cells: 1 correct, 1 garbage, 1 nan, 1 hang, 1 crash, 1 skipped (1 excluded)"; got != want {
		t.Errorf("summary line %q, want %q", got, want)
	}
}
