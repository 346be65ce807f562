package record_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// agreementRunsDir holds the recorded sweeps of the agreement grids (one
// folder per grid of agreementGrids, one run directory in each): real
// sweeps of bmx's simulated host, made by agreementRecord under -update.
// internal/reports' TestAgreementRendered renders them too.
var agreementRunsDir = filepath.Join("testdata", "agreement")

// storyProbes are greedy probes without an expectation: only agreement
// among cells (or a reference) can vouch for their answers.
const storyProbes = `[[probe]]
name = "river"
prompt = "Write two sentences about the river."
max_tokens = 64
logprobs = true

[[probe]]
name = "forest"
prompt = "Write two sentences about the forest."
max_tokens = 64
logprobs = true
`

// agreementGrid is a simulated grid: axes moe (moe_runner_backend) and fp4
// (fp4_gemm_backend) with the given values, and a third axis fault
// (attention_backend) when faults has values; behave gives each cell's
// sim behaviour and variant ("" for healthy). Its cells are probed with
// storyProbes and not measured (the agreement needs no performance
// figures, and they would be a quarter of the recorded bytes), or with
// probes, a probe file's text, when it has one.
type agreementGrid struct {
	moe, fp4, faults []string
	reference        string // TOML inline table, "" for none
	behave           func(moe, fp4, fault string) (behaviour, variant string)
	probes           string
}

// boundedProbes are the probes of the 60-cell grid whose reports' bounds
// internal/reports checks: one short greedy probe, without logprobs (a
// tenth of storyProbes' bytes a cell), and the performance probe at
// concurrency 1, one request, so the table of the fastest cells is
// bounded too.
const boundedProbes = `[[probe]]
name = "say-ok"
prompt = "Say 'OK'"
max_tokens = 8
expect = { contains = "OK" }

[perf]
concurrency = 1
requests = 1
output_tokens = 16
prompt_tokens = 16
`

// Backend names the simulated server accepts (SGLang's choices), for the
// grids' axes: moeN[i] is MoE runner i, fp4N[i] FP4 GEMM i, faultN[i]
// fault value i (an attention backend, as the sim's third matched flag).
var (
	moeN   = []string{"triton", "flashinfer_cutlass", "deep_gemm", "cutlass", "marlin", "aiter"}
	fp4N   = []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "marlin"}
	faultN = []string{"triton", "torch_native", "flex_attention"}
	moe15  = []string{"triton", "flashinfer_cutlass", "deep_gemm", "cutlass", "marlin", "aiter", "triton_kernel", "flashinfer_trtllm",
		"experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_mxfp4", "flashinfer_cutedsl", "humming", "experimental_sgl_marlin", "hpc_ops"}
)

// ref is a reference of a two-axis grid, as a TOML inline table.
func ref(moe, fp4 string) string { return fmt.Sprintf(`{ moe = %q, fp4 = %q }`, moe, fp4) }

// cellID is the ID of a two-axis grid's cell.
func cellID(moe, fp4 string) string { return "moe=" + moe + ",fp4=" + fp4 }

// interactionBug is a grid n x n whose reference's row and column are
// healthy and every cell off both gives the same fluent wrong answer; the
// reference is correct, not configured (none) or crashes.
func interactionBug(n int, reference string) agreementGrid {
	g := agreementGrid{moe: moeN[:n], fp4: fp4N[:n], reference: ref(moeN[0], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			switch {
			case m == moeN[0] && f == fp4N[0] && reference == "crash":
				return "crash", ""
			case m != moeN[0] && f != fp4N[0]:
				return "wrong", "shared-bug"
			}
			return "", ""
		}}
	if reference == "none" {
		g.reference = ""
	}
	return g
}

// cannotTell is three MoE runners and a fault of three values applied the
// same way in every runner, the reference in fault value fault.
func cannotTell(fault string) agreementGrid {
	return agreementGrid{moe: moeN[:3], fp4: fp4N[:1], faults: faultN,
		reference: fmt.Sprintf(`{ moe = %q, fp4 = %q, fault = %q }`, moeN[0], fp4N[0], fault),
		behave: func(_, _, x string) (string, string) {
			if x == faultN[0] {
				return "", ""
			}
			return "wrong", x
		}}
}

// agreementGrids are the grids recorded under agreementRunsDir, by name.
var agreementGrids = map[string]agreementGrid{
	"interaction-4x4-correct":    interactionBug(4, "correct"),
	"interaction-4x4-none":       interactionBug(4, "none"),
	"interaction-4x4-crash":      interactionBug(4, "crash"),
	"interaction-5x5-correct":    interactionBug(5, "correct"),
	"interaction-5x5-crash":      interactionBug(5, "crash"),
	"cannot-tell-triton":         cannotTell(faultN[0]),
	"cannot-tell-torch_native":   cannotTell(faultN[1]),
	"cannot-tell-flex_attention": cannotTell(faultN[2]),
	// A drifting reference whose healthy peers all share a value it lacks.
	"guard": {moe: moeN[:2], fp4: fp4N[:2], reference: ref(moeN[1], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			switch {
			case m == moeN[1] && f == fp4N[0]:
				return "drift", ""
			case m == moeN[0] && f == fp4N[0]:
				return "crash", ""
			}
			return "", ""
		}},
	// Two cells derail after a right first sentence; one parts from the
	// others at the model's near tie.
	"whole-answers": {moe: moeN[:3], fp4: fp4N[:3], reference: ref(moeN[0], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			switch {
			case m == moeN[1] && f == fp4N[2], m == moeN[2] && f == fp4N[1]:
				return "derail", ""
			case m == moeN[2] && f == fp4N[2]:
				return "tie", ""
			}
			return "", ""
		}},
	// Two groups of two agreeing cells, the reference in one.
	"tie": {moe: moeN[:2], fp4: fp4N[:2], reference: ref(moeN[0], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			if (m == moeN[0]) != (f == fp4N[0]) {
				return "wrong", "the other pair"
			}
			return "", ""
		}},
	// The interaction bug on 150 cells: 15 MoE runners x 5 FP4 GEMMs x 2
	// attention backends, probed with storyProbes' first probe only (the
	// recorded run is most of this folder's bytes: 25 KB a broken cell
	// with both).
	"interaction-150": {moe: moe15, fp4: fp4N, faults: faultN[:2], reference: fmt.Sprintf(`{ moe = %q, fp4 = %q, fault = %q }`, moe15[0], fp4N[0], faultN[0]),
		probes: storyProbes[:strings.Index(storyProbes, "\n\n[[probe]]")+1] + "\n[perf]\nenabled = false\n",
		behave: func(m, f, _ string) (string, string) {
			if m != moe15[0] && f != fp4N[0] {
				return "wrong", "shared-bug"
			}
			return "", ""
		}},
	// 60 cells (12 MoE runners x 5 FP4 GEMMs), the last FP4 GEMM crashing:
	// more than a terminal's table shows (internal/reports renders it).
	"bounded-60": {moe: moe15[:12], fp4: fp4N, reference: ref(moe15[0], fp4N[0]), probes: boundedProbes,
		behave: func(_, f, _ string) (string, string) {
			if f == fp4N[4] {
				return "crash", ""
			}
			return "", ""
		}},
}

// write writes the grid's profile, probes and config into dir and returns
// the config's path.
func (g agreementGrid) write(t *testing.T, dir string) string {
	t.Helper()
	var rules strings.Builder
	faults := g.faults
	if len(faults) == 0 {
		faults = []string{""}
	}
	for _, m := range g.moe {
		for _, f := range g.fp4 {
			for _, x := range faults {
				b, v := g.behave(m, f, x)
				if b == "" {
					continue
				}
				when := fmt.Sprintf("moe_runner_backend = %q, fp4_gemm_backend = %q", m, f)
				if x != "" {
					when += fmt.Sprintf(", attention_backend = %q", x)
				}
				fmt.Fprintf(&rules, "[[rule]]\nwhen = { %s }\nbehaviour = %q\nvariant = %q\nerror = \"RuntimeError: CUDA error: an illegal memory access was encountered\"\n\n", when, b, v)
			}
		}
	}
	matrixtest.Profile{Name: "fooled", Startup: "10ms", Body: rules.String()}.Write(t, filepath.Join(dir, "profile.toml"))
	probes := storyProbes + "\n[perf]\nenabled = false\n"
	if g.probes != "" {
		probes = g.probes
	}
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), probes)
	axes := []matrixtest.Axis{
		{Name: "moe", Flag: "--moe-runner-backend", Values: g.moe},
		{Name: "fp4", Flag: "--fp4-gemm-backend", Values: g.fp4},
	}
	if len(g.faults) > 0 {
		axes = append(axes, matrixtest.Axis{Name: "fault", Flag: "--attention-backend", Values: g.faults})
	}
	head := ""
	if g.reference != "" {
		head = "reference = " + g.reference
	}
	return matrixtest.Config{Name: "fooled", Head: head,
		Server: matrixtest.Server{Command: matrixtest.Sim("--sim-profile", "{dir}/profile.toml"), ReadyTimeout: "30s"},
		Axes:   axes, Tail: "[probes]\nfile = \"probes.toml\"\n",
	}.Write(t, filepath.Join(dir, "fooled.toml"))
}

// referenceCases are the 2x2 grids whose cell moe_runner=triton,
// fp4_gemm=flashinfer_cutlass, the configured reference, behaves as the
// case is named (the other three are healthy), probed with bmx's own
// probes.
var referenceCases = []string{"drift", "garbage", "crash"}

// writeReferenceGrid writes the 2x2 grid of a reference case into dir and
// returns the config's path.
func writeReferenceGrid(t *testing.T, dir, broken string) string {
	t.Helper()
	matrixtest.Profile{Name: "agree", Startup: "20ms", Body: `[[rule]]
when = { moe_runner_backend = "triton", fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "` + broken + `"
error = "RuntimeError: CUDA error: an illegal memory access was encountered"
`}.Write(t, filepath.Join(dir, "agree-profile.toml"))
	return matrixtest.Config{Name: "agree", Head: `reference = { moe_runner = "triton", fp4_gemm = "flashinfer_cutlass" }`,
		Server: matrixtest.Server{
			Command:      []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", "{dir}/agree-profile.toml"},
			ReadyTimeout: "30s",
		},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "triton"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		},
	}.Write(t, filepath.Join(dir, "agree.toml"))
}

// agreementRecord sweeps every grid of agreementGrids and referenceCases
// through real bmx and sim-server processes (one sweep after another,
// 4 slots each) and records each run under agreementRunsDir/<name>.
func agreementRecord(t *testing.T) {
	t.Helper()
	bmx := matrixtest.BuildBMX(t)
	configs := map[string]string{}
	work := t.TempDir()
	for name, g := range agreementGrids {
		configs[name] = g.write(t, filepath.Join(work, name))
	}
	for _, broken := range referenceCases {
		name := "reference-" + broken
		configs[name] = writeReferenceGrid(t, filepath.Join(work, name), broken)
	}
	runs := map[string]string{}
	for name, cfg := range configs {
		out := filepath.Join(filepath.Dir(cfg), "runs")
		runs[name], _ = matrixtest.SweepRun(t, bmx, out, "-q", "-c", cfg, "--out", out, "--slots", "4")
	}
	for name, run := range runs {
		rerecord(t, run, filepath.Join(agreementRunsDir, name))
	}
}

// agreementRun reads the recorded run of the grid name, judged again by
// this bmx (loadJudged), and its cells by ID.
func agreementRun(t *testing.T, name string) (*record.Report, map[string]record.Result) {
	t.Helper()
	rep := loadJudged(t, recordedRun(t, filepath.Join(agreementRunsDir, name), "go test ./internal/record -run TestAgreementRecorded -update"))
	cells := map[string]record.Result{}
	for _, c := range rep.Results {
		cells[c.Cell.ID] = c
	}
	return rep, cells
}

// TestAgreementRecorded judges the recorded sweeps of the agreement grids
// again (testdata/agreement; go test ./internal/record -run
// TestAgreementRecorded -update sweeps them again) and checks what the
// agreement among cells makes of each.
func TestAgreementRecorded(t *testing.T) {
	t.Parallel()
	if *update {
		agreementRecord(t)
	}
	// The interaction bug: a bug in every path but the reference's. The
	// broken block outnumbers the healthy cells, but all its members avoid
	// the reference's values: whether the reference is correct, not
	// configured, or crashes, no healthy cell is condemned and no broken
	// cell is correct.
	for _, tc := range []struct {
		n   int
		ref string
	}{{4, "correct"}, {4, "none"}, {4, "crash"}, {5, "correct"}, {5, "crash"}} {
		name := fmt.Sprintf("interaction-%dx%d-%s", tc.n, tc.n, tc.ref)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep, cells := agreementRun(t, name)
			if len(cells) != tc.n*tc.n {
				t.Fatalf("%d cells, want %d", len(cells), tc.n*tc.n)
			}
			for id, c := range cells {
				healthy := strings.HasPrefix(id, "moe="+moeN[0]+",") || strings.HasSuffix(id, "fp4="+fp4N[0])
				switch {
				case id == cellID(moeN[0], fp4N[0]) && tc.ref == "crash":
					if c.Verdict != classify.Crash {
						t.Errorf("%s: %s, want crash", id, c.Verdict)
					}
				case healthy && (c.Verdict != classify.Correct || c.ShapeOnly):
					t.Errorf("healthy %s: %s (shape only %v): %s", id, c.Verdict, c.ShapeOnly, c.Reason)
				case !healthy && c.Verdict != classify.Wrong:
					t.Errorf("broken %s: %s: %s", id, c.Verdict, c.Reason)
				}
			}
			if rep.Agreement == nil || !strings.Contains(rep.Agreement.Note, "which explains its agreement") {
				t.Errorf("the agreement does not say why the larger group lost: %+v", rep.Agreement)
			}
		})
	}
	// Three groups of three identical answers, each explained by its fault
	// value: whichever group holds the reference, bmx cannot tell, and
	// every answering cell is correct*, none wrong (internal/reports'
	// TestAgreementRendered checks each format says so).
	for _, fault := range faultN {
		t.Run("cannot-tell-"+fault, func(t *testing.T) {
			t.Parallel()
			rep, cells := agreementRun(t, "cannot-tell-"+fault)
			if len(cells) != 9 {
				t.Fatalf("%d cells, want 9", len(cells))
			}
			if a := rep.Agreement; a == nil || a.Status != classify.Undecided || len(a.Groups) != 3 {
				t.Fatalf("agreement %+v, want cannot tell between 3 groups", a)
			}
			for id, c := range cells {
				if c.Verdict != classify.Correct || !c.ShapeOnly || !strings.Contains(c.Reason, "unconfirmed") {
					t.Errorf("%s: %s (shape only %v): %s; want correct*, unconfirmed", id, c.Verdict, c.ShapeOnly, c.Reason)
				}
			}
		})
	}
	// A drifting reference whose healthy peers all share a value it lacks
	// stays no yardstick, and the healthy cells are not condemned
	// (degraded) against it.
	t.Run("guard", func(t *testing.T) {
		t.Parallel()
		rep, cells := agreementRun(t, "guard")
		for _, id := range []string{cellID(moeN[0], fp4N[1]), cellID(moeN[1], fp4N[1])} {
			if c := cells[id]; c.Verdict != classify.Correct {
				t.Errorf("healthy %s: %s: %s", id, c.Verdict, c.Reason)
			}
		}
		if rep.Agreement == nil || rep.Agreement.Status != classify.Undecided {
			t.Errorf("agreement %+v, want cannot tell", rep.Agreement)
		}
	})
	// Cells whose first sentence is right and which then run into fluent
	// nonsense neither vouch for the reference nor pass; a healthy cell
	// that parts from the others at the model's near tie agrees with them
	// and is vouched for. Read as recorded (the agreement applied to the
	// verdicts the sweep stored) and judged again, the verdicts are alike.
	t.Run("whole-answers", func(t *testing.T) {
		t.Parallel()
		rep, cells := agreementRun(t, "whole-answers")
		for id, c := range cells {
			derails := id == cellID(moeN[1], fp4N[2]) || id == cellID(moeN[2], fp4N[1])
			if derails && c.Verdict == classify.Correct {
				t.Errorf("derailing %s: correct: %s", id, c.Reason)
			}
			if !derails && (c.Verdict != classify.Correct || c.ShapeOnly || len(c.VouchedBy) == 0) {
				t.Errorf("healthy %s: %s (shape only %v, vouched for by %v): %s", id, c.Verdict, c.ShapeOnly, c.VouchedBy, c.Reason)
			}
		}
		if a := rep.Agreement; a == nil || a.Status != classify.RefConfirmed || len(a.Group) != 7 {
			t.Errorf("agreement %+v, want the reference confirmed by the 7 healthy cells", a)
		}
		read, err := record.Load(rep.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range read.Results {
			if want := cells[c.Cell.ID]; c.Verdict != want.Verdict || c.ShapeOnly != want.ShapeOnly {
				t.Errorf("%s: read as recorded %s (shape only %v), judged again %s (%v)", c.Cell.ID, c.Verdict, c.ShapeOnly, want.Verdict, want.ShapeOnly)
			}
		}
	})
	// Two groups of two agreeing cells, neither explained by its make-up,
	// the reference in one of them: a tie, so bmx cannot tell, and
	// condemns no cell.
	t.Run("tie", func(t *testing.T) {
		t.Parallel()
		rep, cells := agreementRun(t, "tie")
		if a := rep.Agreement; a == nil || a.Status != classify.Undecided || len(a.Groups) != 2 {
			t.Fatalf("agreement %+v, want cannot tell between two groups", a)
		}
		for id, c := range cells {
			if c.Verdict != classify.Correct || !c.ShapeOnly {
				t.Errorf("%s: %s (shape only %v): %s; want correct*", id, c.Verdict, c.ShapeOnly, c.Reason)
			}
		}
	})
	// The interaction bug on 150 cells: the 38 cells on the reference's
	// MoE runner or FP4 GEMM are healthy, the 112 others give one fluent
	// wrong answer; the block never wins.
	t.Run("interaction-150", func(t *testing.T) {
		t.Parallel()
		rep, cells := agreementRun(t, "interaction-150")
		healthy, broken := 0, 0
		for id, c := range cells {
			if strings.HasPrefix(id, "moe="+moe15[0]+",") || strings.Contains(id, ",fp4="+fp4N[0]+",") {
				healthy++
				if c.Verdict != classify.Correct || c.ShapeOnly {
					t.Errorf("healthy %s: %s (shape only %v): %s", id, c.Verdict, c.ShapeOnly, c.Reason)
				}
				continue
			}
			broken++
			if c.Verdict != classify.Wrong {
				t.Errorf("broken %s: %s: %s", id, c.Verdict, c.Reason)
			}
		}
		if a := rep.Agreement; healthy != 38 || broken != 112 || a == nil || a.Status != classify.RefConfirmed {
			t.Errorf("%d healthy, %d broken, agreement %+v", healthy, broken, a)
		}
	})
	// With a drifting, garbage or crashing cell configured as the
	// reference, the three healthy cells (which share no axis value) agree
	// with each other, are correct with positive evidence, and are what
	// the cells are judged against; the broken reference is called what it
	// is, and the agreement says the reference was not the yardstick.
	const reference = "moe_runner=triton,fp4_gemm=flashinfer_cutlass"
	healthy := []string{"moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cutlass", "moe_runner=triton,fp4_gemm=flashinfer_cudnn"}
	for _, tc := range []struct {
		broken string
		want   classify.Verdict
		status classify.AgreementStatus
		says   string
	}{
		{"drift", classify.Degraded, classify.RefOutlier, "is the outlier"},
		{"garbage", classify.Garbage, classify.RefBroken, "failed, so it is no yardstick"},
		{"crash", classify.Crash, classify.RefBroken, "failed, so it is no yardstick"},
	} {
		t.Run("reference-"+tc.broken, func(t *testing.T) {
			t.Parallel()
			rep, cells := agreementRun(t, "reference-"+tc.broken)
			if got := cells[reference]; got.Verdict != tc.want {
				t.Errorf("the %s reference: %s (%s), want %s", tc.broken, got.Verdict, got.Reason, tc.want)
			}
			for _, id := range healthy {
				c := cells[id]
				if c.Verdict != classify.Correct || c.ShapeOnly {
					t.Errorf("healthy %s: %s (shape only %v: %s), want correct with evidence", id, c.Verdict, c.ShapeOnly, c.Reason)
				}
				if len(c.VouchedBy) != 2 {
					t.Errorf("healthy %s: vouched for by %v, want the two other healthy cells", id, c.VouchedBy)
				}
			}
			a := rep.Agreement
			if a == nil {
				t.Fatal("no agreement")
			}
			if a.Status != tc.status || a.Yardstick == reference || a.Yardstick == "" || len(a.Group) != 3 {
				t.Errorf("agreement %+v: want status %s, a healthy yardstick, a group of 3", a, tc.status)
			}
			if len(a.Shared) != 0 {
				t.Errorf("the healthy cells share %v, want nothing", a.Shared)
			}
			if !strings.Contains(a.Note, tc.says) {
				t.Errorf("the agreement does not say the reference %s: %s", tc.says, a.Note)
			}
		})
	}
}
