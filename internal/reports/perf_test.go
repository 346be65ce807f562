package reports

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// perfOf is a measurement with per-request rates around tps (spread
// ±spread%) and time to first token ttftMS, at concurrency 1 and 4, 4
// requests each, of 64 tokens out.
func perfOf(tps, spread, ttftMS float64) *evidence.Perf {
	p := &evidence.Perf{PromptTokens: 128, OutputTokens: 64, PromptTokensSeen: 131, IgnoreEOS: true}
	for _, conc := range []int{1, 4} {
		slow := 1.0
		if conc > 1 {
			slow = 1.45
		}
		var runs []evidence.PerfRequest
		for i, f := range []float64{-1, -0.3, 0.3, 1} {
			rate := tps / slow * (1 + f*spread/100)
			e2e := int64(64 / rate * 1e6)
			ttft := int64(ttftMS * slow * (1 + f*spread/100) * 1000)
			runs = append(runs, evidence.PerfRequest{TTFTUS: ttft, ITLUS: []int64{(e2e - ttft) / 63, (e2e-ttft)/63 + int64(i)}, E2EUS: e2e,
				OutputTokens: 64, PromptTokens: 131, Usage: true, Chunks: 64, FinishReason: "length"})
		}
		wall := time.Duration(runs[3].E2EUS) * time.Microsecond * time.Duration(4/conc)
		p.Levels = append(p.Levels, evidence.SummarizeLevel(conc, 64, runs, wall))
	}
	return p
}

func withPerf(r record.Result, tps, spread float64) record.Result {
	r.Perf = perfOf(tps, spread, 20)
	return r
}

// withFloor records a noise floor with r's measurement, as a probe file's
// [perf] noise_floor_pct does.
func withFloor(r record.Result, pct float64) record.Result {
	r.Perf.NoiseFloorPct = &pct
	return r
}

func perfReport(results ...record.Result) *record.Report {
	return &record.Report{Run: &record.Run{Name: "perf", Axes: []record.AxisValues{{Name: "moe", Values: []string{"a", "b", "c", "d"}}, {Name: "fp4", Values: []string{"x"}}}}, Results: results}
}

func measuredCell(moe string, v classify.Verdict, tps, spread float64) record.Result {
	return withPerf(record.Result{Cell: cell(moe, "x"), Verdict: v}, tps, spread)
}

// TestPerformance checks the ranking and the recommendation: the fastest
// correct cell with its flags, "within noise" rather than a winner when
// spreads overlap, a faster degraded cell named but not recommended, and
// failed cells left out.
func TestPerformance(t *testing.T) {
	tests := []struct {
		name       string
		results    []record.Result
		fastest    string
		noise      []string
		order      []string
		recommend  []string
		unexpected string
	}{
		{
			name: "one clear winner, a faster degraded cell, a garbage cell left out",
			results: []record.Result{
				measuredCell("a", classify.Correct, 500, 2),
				measuredCell("b", classify.Correct, 700, 2),
				measuredCell("c", classify.Degraded, 900, 2),
				measuredCell("d", classify.Garbage, 2000, 2),
			},
			fastest: "moe=b,fp4=x",
			order:   []string{"moe=c,fp4=x", "moe=b,fp4=x", "moe=a,fp4=x"},
			recommend: []string{
				"fastest correct cell: moe=b,fp4=x, 483 (473-492) tok/s per request incl. TTFT at concurrency 4; 40% ahead of moe=a,fp4=x, beyond both spreads and the 5% between-start noise floor",
				"recommended flags: --moe b --fp4 x",
				"note: moe=c,fp4=x is faster, 621 (608-633) tok/s per request incl. TTFT, but degraded: its numerics diverge from the reference cell's",
			},
		},
		{
			name: "within noise",
			results: []record.Result{
				measuredCell("a", classify.Correct, 700, 10),
				measuredCell("b", classify.Correct, 690, 10),
				measuredCell("c", classify.Correct, 300, 10),
			},
			noise: []string{"moe=a,fp4=x", "moe=b,fp4=x"},
			order: []string{"moe=a,fp4=x", "moe=b,fp4=x", "moe=c,fp4=x"},
			recommend: []string{
				"within noise, no single fastest correct cell: 2 correct cells tie (moe=a,fp4=x; moe=b,fp4=x): the fastest, 483 tok/s per request incl. TTFT at concurrency 4, is not ahead of them by more than the spreads and the 5% between-start noise floor (perf.noise_floor_pct)",
				"flags of moe=a,fp4=x, 483 (434-531) tok/s per request incl. TTFT: --moe a --fp4 x",
				"flags of moe=b,fp4=x, 476 (428-523) tok/s per request incl. TTFT: --moe b --fp4 x",
			},
			unexpected: "recommended flags",
		},
		{
			// One start's requests are steady, so the spreads are apart;
			// a restart moves a cell by more than 2%, so the floor ties them.
			name: "spreads apart, 2% apart: within the noise floor",
			results: []record.Result{
				measuredCell("a", classify.Correct, 700, 0.5),
				measuredCell("b", classify.Correct, 686, 0.5),
				measuredCell("c", classify.Correct, 300, 0.5),
			},
			noise: []string{"moe=a,fp4=x", "moe=b,fp4=x"},
			order: []string{"moe=a,fp4=x", "moe=b,fp4=x", "moe=c,fp4=x"},
			recommend: []string{
				"within noise, no single fastest correct cell: 2 correct cells tie (moe=a,fp4=x; moe=b,fp4=x): the fastest, 483 tok/s per request incl. TTFT at concurrency 4, is not ahead of them by more than the spreads and the 5% between-start noise floor (perf.noise_floor_pct)",
				"flags of moe=a,fp4=x, 483 (480-485) tok/s per request incl. TTFT: --moe a --fp4 x",
				"flags of moe=b,fp4=x, 473 (471-475) tok/s per request incl. TTFT: --moe b --fp4 x",
			},
			unexpected: "recommended flags",
		},
		{
			name: "2% apart with a 1% noise floor: crowned",
			results: []record.Result{
				withFloor(measuredCell("a", classify.Correct, 700, 0.5), 1),
				withFloor(measuredCell("b", classify.Correct, 686, 0.5), 1),
			},
			fastest: "moe=a,fp4=x",
			order:   []string{"moe=a,fp4=x", "moe=b,fp4=x"},
			recommend: []string{
				"fastest correct cell: moe=a,fp4=x, 483 (480-485) tok/s per request incl. TTFT at concurrency 4; 2% ahead of moe=b,fp4=x, beyond both spreads and the 1% between-start noise floor",
				"recommended flags: --moe a --fp4 x",
			},
		},
		{
			name: "30% apart: crowned",
			results: []record.Result{
				measuredCell("a", classify.Correct, 700, 2),
				measuredCell("b", classify.Correct, 538, 2),
			},
			fastest: "moe=a,fp4=x",
			order:   []string{"moe=a,fp4=x", "moe=b,fp4=x"},
			recommend: []string{
				"fastest correct cell: moe=a,fp4=x, 483 (473-492) tok/s per request incl. TTFT at concurrency 4; 30% ahead of moe=b,fp4=x, beyond both spreads and the 5% between-start noise floor",
				"recommended flags: --moe a --fp4 x",
			},
		},
		{
			name: "30% apart with a 40% noise floor: within noise",
			results: []record.Result{
				withFloor(measuredCell("a", classify.Correct, 700, 2), 40),
				withFloor(measuredCell("b", classify.Correct, 538, 2), 40),
			},
			noise: []string{"moe=a,fp4=x", "moe=b,fp4=x"},
			order: []string{"moe=a,fp4=x", "moe=b,fp4=x"},
			recommend: []string{
				"within noise, no single fastest correct cell: 2 correct cells tie (moe=a,fp4=x; moe=b,fp4=x): the fastest, 483 tok/s per request incl. TTFT at concurrency 4, is not ahead of them by more than the spreads and the 40% between-start noise floor (perf.noise_floor_pct)",
				"flags of moe=a,fp4=x, 483 (473-492) tok/s per request incl. TTFT: --moe a --fp4 x",
				"flags of moe=b,fp4=x, 371 (364-378) tok/s per request incl. TTFT: --moe b --fp4 x",
			},
			unexpected: "recommended flags",
		},
		{
			name:      "only degraded cells",
			results:   []record.Result{measuredCell("a", classify.Degraded, 700, 1)},
			order:     []string{"moe=a,fp4=x"},
			recommend: []string{"no correct cell has performance figures: nothing to recommend"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PerformanceOf(perfReport(tt.results...))
			var order []string
			for _, r := range p.Cells {
				order = append(order, r.Cell)
			}
			if d := cmp.Diff(tt.order, order); d != "" {
				t.Errorf("order: %s", d)
			}
			if p.Fastest != tt.fastest || !cmp.Equal(p.WithinNoise, tt.noise) {
				t.Errorf("fastest %q, within noise %q", p.Fastest, p.WithinNoise)
			}
			if d := cmp.Diff(tt.recommend, p.Recommendation); d != "" {
				t.Errorf("recommendation: %s", d)
			}
			var out bytes.Buffer
			if err := Table(&out, perfReport(tt.results...)); err != nil {
				t.Fatal(err)
			}
			for _, l := range tt.recommend {
				if !strings.Contains(out.String(), l) {
					t.Errorf("the table lacks %q:\n%s", l, out.String())
				}
			}
			if tt.unexpected != "" && strings.Contains(out.String(), tt.unexpected) {
				t.Errorf("the table says %q", tt.unexpected)
			}
		})
	}
	if PerformanceOf(perfReport(measuredCell("a", classify.Garbage, 500, 2), record.Result{Cell: cell("b", "x"), Verdict: classify.Correct})) != nil {
		t.Error("no correct or degraded cell measured: no performance section")
	}
}

// TestPerformanceFlags checks the flags to paste are the cell's own, with
// secrets redacted and its environment named.
func TestPerformanceFlags(t *testing.T) {
	c := matrix.Cell{ID: "k=v", Values: []matrix.AxisValue{{Axis: "k", Value: "v"}},
		Args: []string{"--api-key", "sk-abcdefghijklmnopqrstuvwx", "--kv-cache-dtype", "fp8 e4m3"},
		Env:  map[string]string{"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-cudnn", "HF_TOKEN": "hf_abcdefghijklmnopqrstu"}}
	p := PerformanceOf(perfReport(withPerf(record.Result{Cell: c, Verdict: classify.Correct}, 100, 1)))
	want := "recommended flags: --api-key '<redacted>' --kv-cache-dtype 'fp8 e4m3'  (environment: 'HF_TOKEN=<redacted>' VLLM_NVFP4_GEMM_BACKEND=flashinfer-cudnn)"
	if p.Recommendation[1] != want {
		t.Errorf("got  %s\nwant %s", p.Recommendation[1], want)
	}
}

// TestPerformanceFormats checks every format carries the performance
// figures of the fixture's correct cell and none of its garbage cell's.
func TestPerformanceFormats(t *testing.T) {
	for _, format := range []string{"table", "md", "html", "json", "csv"} {
		t.Run(format, func(t *testing.T) {
			out := render(t, func(b *bytes.Buffer, r *record.Report) error { return Render(format, b, r) })
			s := string(out)
			// The correct cell: 100 tok/s alone, 69 per request at 4.
			for _, want := range []string{"69.0", "--moe cutlass --fp4 cudnn"} {
				if format == "csv" && want == "69.0" {
					want = "68.966"
				}
				if format == "csv" && strings.HasPrefix(want, "--") {
					want = "c4_tok_s_req"
				}
				if !strings.Contains(s, want) {
					t.Errorf("%s lacks %q", format, want)
				}
			}
			// tok/s per request is labelled as including TTFT, and TPOT
			// and the decode rate stand apart from it; the median gap
			// between chunks is not reported.
			labels := map[string][]string{
				"table": {"tok/s/req incl TTFT", "| decode ", "decode = tok/s per request after the first token", "TTFT included"},
				"md":    {"tok/s per request incl. TTFT", "| TPOT ms |", "decode tok/s per request", "TTFT included"},
				"html":  {"tok/s per request incl. TTFT", "<th>TPOT ms</th>", "decode tok/s per request", "TTFT included"},
				"csv":   {"c4_tok_s_req_incl_ttft,", "c4_tpot_ms,", "c4_decode_tok_s_req,"},
				"json":  {`"tokens_per_s_incl_ttft"`, `"rank_tokens_per_s_incl_ttft"`, `"tpot_ms"`, `"decode_tokens_per_s"`, `"noise_floor_pct": 5`},
			}
			for _, want := range labels[format] {
				if !strings.Contains(s, want) {
					t.Errorf("%s lacks %q", format, want)
				}
			}
			for _, bad := range []string{"ITL", "itl_ms", "itl_median", `"tokens_per_s":`, "c4_tok_s_req,"} {
				if strings.Contains(s, bad) {
					t.Errorf("%s still has %q", format, bad)
				}
			}
			// The garbage cell's 500 tok/s is never shown (report.json
			// keeps every cell's measurement with the cell, as recorded).
			for _, bad := range []string{"500 (", "345 (", "344.8"} {
				if format != "json" && strings.Contains(s, bad) {
					t.Errorf("%s shows the garbage cell's figures (%q)", format, bad)
				}
			}
		})
	}
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return JSON(b, r) })
	var back struct {
		Performance Performance     `json:"performance"`
		Cells       []record.Result `json:"cells"`
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back.Performance.Fastest != "moe=cutlass,fp4=cudnn" || len(back.Performance.Cells) != 1 || back.Cells[0].Perf == nil || back.Cells[0].Perf.Levels[1].Requests != 4 {
		t.Errorf("report.json: %+v", back.Performance)
	}
}

// TestPerfDiff checks a cell made slower beyond 10% with the runs' spreads
// apart is a perf regression (one per figure and concurrency), and a change
// within noise, under 10% or (for TTFT) under 10 ms is not.
func TestPerfDiff(t *testing.T) {
	at := func(moe string, tps, spread, ttft float64) record.Result {
		r := record.Result{Cell: cell(moe, "x"), Verdict: classify.Correct}
		r.Perf = perfOf(tps, spread, ttft)
		return r
	}
	base := perfReport(at("a", 500, 2, 20), at("b", 500, 2, 20), at("c", 500, 30, 20), at("d", 500, 2, 20), at("e", 500, 2, 20),
		at("f", 500, 2, 20), at("g", 500, 10, 20))
	next := perfReport(
		at("a", 400, 2, 20),  // 20% slower, far outside the spreads
		at("b", 480, 2, 20),  // 4% slower: under 10%
		at("c", 400, 30, 20), // 20% slower, but the spreads overlap
		at("d", 500, 2, 35),  // a first token 15 ms (21.75 ms at 4) slower
		at("e", 600, 2, 20),  // faster
		at("f", 500, 2, 26),  // a first token 30% slower, but by 6 ms (8.7 at 4): scheduling
		// 16% slower, each median outside the other run's spread, but the
		// spreads overlap (378-462 and 450-550): one request of the new
		// run was faster than one of the old.
		at("g", 420, 10, 20),
	)
	d := Compare(base, next)
	type change struct {
		cell, kind, metric string
		conc               int
	}
	var got []change
	for _, p := range d.Perf {
		got = append(got, change{p.Cell, p.Kind, p.Metric, p.Concurrency})
	}
	want := []change{
		{"moe=a,fp4=x", PerfRegression, MetricTokensPerSecond, 1}, {"moe=a,fp4=x", PerfRegression, MetricTokensPerSecond, 4},
		{"moe=d,fp4=x", PerfRegression, MetricTTFT, 1}, {"moe=d,fp4=x", PerfRegression, MetricTTFT, 4},
		{"moe=e,fp4=x", PerfImprovement, MetricTokensPerSecond, 1}, {"moe=e,fp4=x", PerfImprovement, MetricTokensPerSecond, 4},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(change{})); diff != "" {
		t.Error(diff)
	}
	if d.Perf[0].Change != -0.2 || d.Count(PerfRegression) != 2 || d.Count(Regression) != 0 || d.Unchanged != 7 {
		t.Errorf("change %g, count %d, unchanged %d", d.Perf[0].Change, d.Count(PerfRegression), d.Unchanged)
	}
	if !slices.Contains(FlipKinds, PerfRegression) {
		t.Error("--fail-on cannot name perf-regression")
	}
	var table, md, js bytes.Buffer
	DiffTable(&table, d)
	DiffMarkdown(&md, d)
	DiffJSON(&js, d)
	for name, out := range map[string]string{"table": table.String(), "md": md.String(), "json": js.String()} {
		for _, want := range []string{"moe=a,fp4=x", "perf-regression", "perf-improvement"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "moe=c,fp4=x") || strings.Contains(out, "moe=b,fp4=x") || strings.Contains(out, "moe=f,fp4=x") || strings.Contains(out, "moe=g,fp4=x") {
			t.Errorf("%s reports noise:\n%s", name, out)
		}
	}
	if !strings.Contains(table.String(), "| -20%") || !strings.Contains(table.String(), "2 perf-regression, 1 perf-improvement") {
		t.Errorf("table:\n%s", table.String())
	}
	// A cell that failed in the new run is a verdict flip, not a
	// performance change.
	broken := perfReport(at("a", 100, 2, 20))
	broken.Results[0].Verdict = classify.Garbage
	if d := Compare(base, broken); len(d.Perf) != 0 || d.Count(Regression) != 1 {
		t.Errorf("perf %+v, flips %+v", d.Perf, d.Flips)
	}
}

// TestPerformanceSharedCPU: cells measured on slots that ran at once, on a
// host with fewer CPUs than the slots times each server's threads, are
// said to share the CPU; with the CPUs to spare, or one slot, they are not.
func TestPerformanceSharedCPU(t *testing.T) {
	tests := []struct {
		name         string
		slots, cpus  int
		argv         []string
		shares       bool
		threadsInMsg string
	}{
		{"2 slots x -t 2 on 2 CPUs", 2, 2, []string{"llama-server", "-t", "2"}, true, "2 slots ran servers of 2 thread(s) each at once on 2 CPUs"},
		{"2 slots x --threads=4 on 6 CPUs", 2, 6, []string{"llama-server", "--threads=4"}, true, "of 4 thread(s)"},
		{"2 slots x -t 1 on 2 CPUs", 2, 2, []string{"llama-server", "-t", "1"}, false, ""},
		{"2 slots x -t 2 on 4 CPUs", 2, 4, []string{"llama-server", "-t", "2"}, false, ""},
		{"1 slot x -t 8 on 2 CPUs", 1, 2, []string{"llama-server", "-t", "8"}, false, ""},
		{"3 slots, no thread flag, on 2 CPUs", 3, 2, []string{"python3", "server.py"}, true, "of 1 thread(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := measuredCell("a", classify.Correct, 500, 2), measuredCell("b", classify.Correct, 300, 2)
			a.Argv, b.Argv = tt.argv, tt.argv
			rep := perfReport(a, b)
			rep.Run.Slots = make([]string, tt.slots)
			rep.Run.Host.CPUs = tt.cpus
			p := PerformanceOf(rep)
			note := ""
			for _, l := range p.Recommendation {
				if strings.Contains(l, "share the CPU") {
					note = l
				}
			}
			if (note != "") != tt.shares || !strings.Contains(note, tt.threadsInMsg) {
				t.Errorf("note %q, want one: %v (%q)", note, tt.shares, tt.threadsInMsg)
			}
			var md bytes.Buffer
			if err := Markdown(&md, rep); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(md.String(), "share the CPU") != tt.shares {
				t.Errorf("the Markdown report and the note disagree:\n%s", md.String())
			}
		})
	}
}
