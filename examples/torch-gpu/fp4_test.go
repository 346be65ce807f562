package torchgpu

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// TestNVFP4 runs nvfp4_test.py: the FP4 format with the standard library
// (e2m1 and e4m3 rounding, packing, the two recipes' scales, the 128x4
// swizzle, the dequantiser, linear scales read as swizzled, the global
// scale dropped), and, where the interpreter has torch, moe_fp4.py's
// quantiser and dequant path byte for byte against it (skipped otherwise,
// with the reason in the log).
func TestNVFP4(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(python()); err != nil {
		testenv.Skip(t, "the FP4 format tests need %s: it is not installed", python())
	}
	cmd := exec.Command(python(), "nvfp4_test.py", "-v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nvfp4_test.py: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "skipped") {
			t.Log(l)
		}
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Errorf("nvfp4_test.py did not end with OK:\n%s", out)
	}
}

// fp4Run is the committed live sweep of moe-fp4.toml.
const fp4Run = "h100-fp4"

// TestFP4Report guards the committed FP4 sweep (fp4Run/run, as the device
// left it): every cell is explained in fp4Run/NOTES.md and every row is a
// cell; the notes' verdict column is report.json's end-of-run verdict and
// that of the evidence judged again by this bmx (so `bmx report --rejudge`
// leaves it; report.json is this bmx's rendering of the run, the device's
// is report-device.json); each row says the verdict the cell printed when it ended
// (results.jsonl's), and its KL column is the KL recorded then (report.json
// has it for the cells judged against a group, none for the correct* ones:
// the test checks that it has none or the same); a crash row quotes the cell's signature,
// every cell's log is there; and the run answers the issue: at least 3
// runners x 3 FP4 implementations, at least 6 FP4 cells answered (not
// crash, hang or inconclusive).
func TestFP4Report(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(fp4Run, "run")
	notes := readNotes(t, filepath.Join(fp4Run, "NOTES.md"))
	run, err := record.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if g := run.Run.Host.GPU; !strings.HasPrefix(g, "NVIDIA H100") && !strings.HasPrefix(g, "NVIDIA H200") {
		t.Errorf("run.json: GPU %q, want the device's H100 or H200", g)
	}
	committed, committedKL := readReportJSON(t, filepath.Join(fp4Run, "report.json"))
	printed, storedKL := readResultsJSONL(t, filepath.Join(dir, "results.jsonl"))
	if len(printed) != 28 {
		t.Errorf("results.jsonl: %d cells, want 28", len(printed))
	}
	for id, v := range printed {
		if n, ok := notes[id]; ok && !strings.Contains(n.text, "Printed `"+v+"` when it ended") {
			t.Errorf("%s: the notes do not say it printed %s when it ended", id, v)
		}
	}
	answered, runners, impls := 0, map[string]bool{}, map[string]bool{}
	for _, r := range run.Results {
		if _, err := os.Stat(filepath.Join(dir, "logs", record.LogName(r.Cell, 1))); err != nil {
			t.Errorf("%s: %v", r.Cell.ID, err)
		}
		if r.Verdict == classify.Crash && !strings.Contains(notes[r.Cell.ID].text, r.Signature[:min(len(r.Signature), 39)]) {
			t.Errorf("%s: the notes do not quote its signature %q", r.Cell.ID, r.Signature)
		}
		fp4, _ := r.Cell.Value("fp4")
		switch r.Verdict {
		case classify.Crash, classify.Hang, classify.Inconclusive:
		default:
			if fp4 != "none" {
				answered++
				m, _ := r.Cell.Value("moe")
				runners[m], impls[fp4] = true, true
			}
		}
	}
	if answered < 6 || len(runners) < 3 || len(impls) < 3 {
		t.Errorf("%d FP4 cells answered, over runners %v and implementations %v: want 6, 3 and 3", answered, runners, impls)
	}
	run.Rejudge()
	now, nowKL := map[string]string{}, map[string]string{}
	for _, r := range run.Results {
		now[r.Cell.ID] = shown(string(r.Verdict), r.ShapeOnly)
		nowKL[r.Cell.ID] = klShown(r.Numerics)
	}
	for what, verdicts := range map[string]map[string]string{"report.json": committed, "rejudged": now} {
		for id, n := range notes {
			if v, ok := verdicts[id]; !ok {
				t.Errorf("%s: NOTES.md explains %s, which is not a cell", what, id)
			} else if v != n.bmx {
				t.Errorf("%s: %s: %s, NOTES.md says %s", what, id, v, n.bmx)
			}
		}
		for id := range verdicts {
			if _, ok := notes[id]; !ok {
				t.Errorf("%s: %s is not explained in NOTES.md", what, id)
			}
		}
	}
	for id, n := range notes {
		if got := storedKL[id]; got != normKL(n.kl) {
			t.Errorf("results.jsonl: %s: KL %s, NOTES.md says %s", id, got, n.kl)
		}
		for what, kls := range map[string]map[string]string{"report.json": committedKL, "rejudged": nowKL} {
			if got := kls[id]; got != "-" && got != normKL(n.kl) {
				t.Errorf("%s: %s: KL %s, NOTES.md says %s", what, id, got, n.kl)
			}
		}
	}
}

// readResultsJSONL reads a run's results.jsonl as the device wrote it:
// each cell's verdict when it ended and the KL against the reference
// recorded then (klShown), before any agreement among cells.
func readResultsJSONL(t *testing.T, path string) (verdicts, kls map[string]string) {
	t.Helper()
	verdicts, kls = map[string]string{}, map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(readFile(t, path))), "\n") {
		var r struct {
			Cell struct {
				ID string `json:"id"`
			} `json:"cell"`
			Verdict  string             `json:"verdict"`
			Numerics *classify.Numerics `json:"numerics"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		verdicts[r.Cell.ID], kls[r.Cell.ID] = r.Verdict, klShown(r.Numerics)
	}
	return verdicts, kls
}

// TestMatrixFP4 checks moe-fp4.toml: three MoE runners x five FP4
// implementations in bfloat16 with the experts padded to 32, the knobs
// (linear scales, the global scale dropped, MXFP4) each on three runners,
// the alignment cells (pad 16 on the TMA kernel, pad 0), the unquantised
// reference first and a bfloat16 cell without FP4: 28 cells, each passing
// its values to the server's flags.
func TestMatrixFP4(t *testing.T) {
	t.Parallel()
	cfg, err := matrix.LoadFile("moe-fp4.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	const ref = "moe=naive,dtype=float32,fp4=none,recipe=nvfp4,scales=swizzled,global=applied,pad=0"
	if len(plan.Cells) != 28 || plan.Reference != ref || plan.Cells[0].ID != ref {
		t.Fatalf("%d cells, reference %q, first %q", len(plan.Cells), plan.Reference, plan.Cells[0].ID)
	}
	flags := map[string]string{"moe": "--moe-runner", "dtype": "--dtype", "fp4": "--fp4-gemm", "recipe": "--fp4-recipe",
		"scales": "--fp4-scale-layout", "global": "--fp4-global-scale", "pad": "--moe-pad"}
	cross := map[string]bool{}
	knobs := map[string]map[string]bool{"recipe=mxfp4": {}, "scales=linear": {}, "global=dropped": {}}
	for _, c := range plan.Cells {
		v := map[string]string{}
		for _, x := range c.Values {
			v[x.Axis] = x.Value
			i := slices.Index(c.Args, flags[x.Axis])
			if i < 0 || c.Args[i+1] != x.Value {
				t.Errorf("%s: args %v do not pass %s %s", c.ID, c.Args, flags[x.Axis], x.Value)
			}
		}
		plain := v["recipe"] == "nvfp4" && v["scales"] == "swizzled" && v["global"] == "applied"
		if plain && v["pad"] == "32" && v["fp4"] != "none" {
			cross[v["moe"]+"/"+v["fp4"]] = true
		}
		for k, runners := range knobs {
			if strings.Contains(c.ID, k) {
				runners[v["moe"]] = true
				if v["fp4"] == "none" || v["pad"] != "32" {
					t.Errorf("%s: a knob cell without FP4 or unpadded", c.ID)
				}
			}
		}
	}
	if len(cross) != 15 {
		t.Errorf("runner x fp4 cross: %d cells, want 3 x 5: %v", len(cross), cross)
	}
	for k, runners := range knobs {
		if len(runners) != 3 {
			t.Errorf("%s on %d runners, want 3", k, len(runners))
		}
	}
}
