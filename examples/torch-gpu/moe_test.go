package torchgpu

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// tensorFile is a safetensors file's float32 tensors by name.
type tensorFile map[string]struct {
	shape []int
	data  []float32
}

func readTensors(t *testing.T, path string) tensorFile {
	t.Helper()
	raw := readFile(t, path)
	n := binary.LittleEndian.Uint64(raw)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &header); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := tensorFile{}
	for name, h := range header {
		if name == "__metadata__" {
			continue
		}
		var info struct {
			Dtype   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(h, &info); err != nil || info.Dtype != "F32" {
			t.Fatalf("%s: %s: %v %s", path, name, err, h)
		}
		body := raw[8+int(n)+info.Offsets[0] : 8+int(n)+info.Offsets[1]]
		data := make([]float32, len(body)/4)
		for i := range data {
			data[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
		}
		out[name] = struct {
			shape []int
			data  []float32
		}{info.Shape, data}
	}
	return out
}

// rms is the root mean square of a - b (of a when b is nil).
func rms(a, b []float32) float64 {
	s := 0.0
	for i, v := range a {
		d := float64(v)
		if b != nil {
			d -= float64(b[i])
		}
		s += d * d
	}
	return math.Sqrt(s / float64(len(a)))
}

// convertMoE is moe.py convert of the model with seed 0, made once for the
// package (shared).
func convertMoE(t *testing.T, model string) string {
	t.Helper()
	return shared(t, "moe "+model, func(dir string) []string { return stdlib("moe.py", "convert", model, dir, "--seed", "0") })
}

// convertMoEAgain is moe.py convert of the model with seed into a
// directory of its own, for TestConvertMoE to compare conversions.
func convertMoEAgain(t *testing.T, model string, seed int) string {
	t.Helper()
	dir := t.TempDir()
	run(t, python(), stdlib("moe.py", "convert", model, dir, "--seed", fmt.Sprint(seed))...)
	return dir
}

func referenceMoE(t *testing.T, dir, prompt string, n int, renormalize string) generated {
	t.Helper()
	var g generated
	out := run(t, python(), stdlib("moe.py", "generate", dir, prompt, fmt.Sprint(n), "--renormalize", renormalize)...)
	if err := json.Unmarshal(out, &g); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return g
}

// TestConvertMoE makes the MoE model from the GGUF with the standard library
// alone and checks what the sweep relies on: it is the same for the same
// seed (byte for byte) and another for another seed; each layer has 8
// experts and a router of the right shapes; every expert is the dense MLP
// plus noise of 0.1 times the matrix's RMS, and no two experts are alike.
// Then the plain-Python MoE forward pass: renormalised, the experts keep
// the dense model's story ("Once upon a time", 16 greedy tokens) with other
// numbers; without the renormalisation the story is another.
func TestConvertMoE(t *testing.T) {
	t.Parallel()
	model := needModel(t)
	dir := convertMoE(t, model)
	if !bytes.Equal(readFile(t, filepath.Join(dir, "moe.safetensors")), readFile(t, filepath.Join(convertMoEAgain(t, model, 0), "moe.safetensors"))) {
		t.Error("two conversions with seed 0 differ")
	}
	if bytes.Equal(readFile(t, filepath.Join(dir, "moe.safetensors")), readFile(t, filepath.Join(convertMoEAgain(t, model, 1), "moe.safetensors"))) {
		t.Error("seeds 0 and 1 give the same experts")
	}
	var cfg map[string]float64
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, "moe.json")), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"num_experts": 8, "top_k": 2, "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5, "seed": 0} {
		if cfg[k] != want {
			t.Errorf("moe.json %s = %v, want %v", k, cfg[k], want)
		}
	}

	dense, experts := readTensors(t, filepath.Join(dir, "model.safetensors")), readTensors(t, filepath.Join(dir, "moe.safetensors"))
	if len(experts) != 15 {
		t.Errorf("%d MoE tensors, want router, w13 and w2 for 5 layers", len(experts))
	}
	const E, H, I = 8, 64, 172
	for li := range 5 {
		p := fmt.Sprintf("model.layers.%d.", li)
		router, w13, w2 := experts[p+"moe.router"], experts[p+"moe.w13"], experts[p+"moe.w2"]
		if !slices.Equal(router.shape, []int{E, H}) || !slices.Equal(w13.shape, []int{E, 2 * I, H}) || !slices.Equal(w2.shape, []int{E, H, I}) {
			t.Fatalf("layer %d: router %v, w13 %v, w2 %v", li, router.shape, w13.shape, w2.shape)
		}
		for e := range E {
			for _, m := range []struct {
				name string
				got  []float32
			}{
				{"gate_proj", w13.data[e*2*I*H : e*2*I*H+I*H]},
				{"up_proj", w13.data[e*2*I*H+I*H : (e+1)*2*I*H]},
				{"down_proj", w2.data[e*H*I : (e+1)*H*I]},
			} {
				d := dense[p+"mlp."+m.name+".weight"].data
				if rel := rms(m.got, d) / rms(d, nil); rel < 0.095 || rel > 0.105 {
					t.Errorf("layer %d expert %d %s: noise %.4f of the dense RMS, want 0.1", li, e, m.name, rel)
				}
			}
		}
		if rel := rms(w2.data[:H*I], w2.data[H*I:2*H*I]) / rms(w2.data[:H*I], nil); rel < 0.1 {
			t.Errorf("layer %d: experts 0 and 1 differ by only %.4f of their RMS", li, rel)
		}
	}

	const n = 16
	// One process generates the three stories (each byte for byte what
	// moe.py generate --renormalize on, off and gguf2hf.py generate print),
	// not one each: the tokenizer is loaded once.
	out := run(t, python(), "-S", "-c", `import sys
import gguf2hf, moe
d, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = gguf2hf.Tokenizer.load(d)
for model in (lambda: moe.ReferenceMoE(d, renormalize=True), lambda: moe.ReferenceMoE(d, renormalize=False), lambda: gguf2hf.ReferenceLlama(d)):
    print(gguf2hf.generate_json(model(), tok, prompt, n))`, dir, "Once upon a time", fmt.Sprint(n))
	var stories [3]generated
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := range stories {
		if len(lines) != len(stories) || json.Unmarshal([]byte(lines[i]), &stories[i]) != nil {
			t.Fatalf("not three stories:\n%s", out)
		}
	}
	on, off, plain := stories[0], stories[1], stories[2]
	if on.Text != plain.Text || len(on.Steps) != n {
		t.Errorf("the MoE model's story %q, the dense model's %q", on.Text, plain.Text)
	}
	worst := 0.0
	for i := range min(len(on.Steps), len(plain.Steps)) {
		worst = max(worst, math.Abs(on.Steps[i].Logprob-plain.Steps[i].Logprob))
	}
	if worst < 0.01 {
		t.Errorf("the experts change the chosen tokens' logprobs by %.3g nats at most: the routing would not matter", worst)
	}
	if off.Text == on.Text {
		t.Errorf("without the renormalisation the story is the same: %q", off.Text)
	}
	t.Logf("MoE %q (logprobs up to %.3f nats from the dense model's); renormalize off: %q", on.Text, worst, off.Text)
}

// TestMatrixMoE checks the MoE matrix: 4 runners x 2 dtypes x 2 GEMMs, the
// renormalisation off for three runners and fp4 and float16 for two, the
// experts padded to 16 for the two grouped GEMMs in bfloat16, 28 cells, the
// reference first, the renormalisation and the padding in every cell's id.
func TestMatrixMoE(t *testing.T) {
	t.Parallel()
	cfg, err := matrix.LoadFile("moe.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	const ref = "moe=naive,dtype=float32,renorm=on,gemm=dense,pad=0"
	if len(plan.Cells) != 28 || plan.Reference != ref || plan.Cells[0].ID != ref {
		t.Fatalf("%d cells, reference %q first %q", len(plan.Cells), plan.Reference, plan.Cells[0].ID)
	}
	values := map[string]map[string]bool{}
	off, padded := map[string]bool{}, map[string]bool{}
	for _, c := range plan.Cells {
		if !strings.Contains(c.ID, ",renorm=") || !strings.Contains(c.ID, ",pad=") {
			t.Errorf("%s: the renormalisation or the padding is not in the id", c.ID)
		}
		for _, v := range c.Values {
			if values[v.Axis] == nil {
				values[v.Axis] = map[string]bool{}
			}
			values[v.Axis][v.Value] = true
		}
		if p, _ := c.Value("pad"); p == "16" {
			m, _ := c.Value("moe")
			d, _ := c.Value("dtype")
			padded[m] = true
			if d != "bfloat16" || !slices.Contains(c.Args, "--moe-pad") || !slices.Contains(c.Args, "16") {
				t.Errorf("%s: argv %v", c.ID, c.Args)
			}
		}
		if r, _ := c.Value("renorm"); r == "off" {
			m, _ := c.Value("moe")
			off[m] = true
			if !slices.Contains(c.Args, "--moe-renormalize") || !slices.Contains(c.Args, "off") {
				t.Errorf("%s: argv %v", c.ID, c.Args)
			}
		}
	}
	if len(values["moe"]) != 4 || len(values["dtype"]) != 3 || len(values["gemm"]) != 3 || len(values["pad"]) != 2 || len(off) < 2 {
		t.Errorf("values %v, renormalisation off for %v", values, off)
	}
	if !padded["grouped_mm"] || !padded["fp8_grouped"] || len(padded) != 2 {
		t.Errorf("padded runners %v, want grouped_mm and fp8_grouped", padded)
	}
}

// TestServerCPUMoE serves the MoE model on CPU in float32 through the naive
// runner (renormalised and not) and, where torch has it, torch._grouped_mm,
// and checks one short greedy answer of each against the plain-Python MoE:
// the same 8 tokens, top-5 logprobs within 1e-3 nats.
func TestServerCPUMoE(t *testing.T) {
	model := needModel(t)
	needTorch(t)
	dir := convertMoE(t, model)
	const n, prompt = 8, "Lily and her dog went to the park."
	refs := map[string]generated{"on": referenceMoE(t, dir, prompt, n, "on"), "off": referenceMoE(t, dir, prompt, n, "off")}
	for _, c := range []struct{ runner, renorm string }{{"naive", "on"}, {"naive", "off"}, {"grouped_mm", "on"}} {
		t.Run(c.runner+"/"+c.renorm, func(t *testing.T) {
			if c.runner == "grouped_mm" {
				if out, err := exec.Command(python(), "-c", "import torch; torch._grouped_mm").CombinedOutput(); err != nil {
					t.Skipf("this torch has no torch._grouped_mm (2.8 or later has it): %s", strings.TrimSpace(string(out)))
				}
			}
			url := startServer(t, model, "--device", "cpu", "--attention-backend", "math", "--dtype", "float32",
				"--moe-runner", c.runner, "--moe-renormalize", c.renorm)
			answer, worst := greedyAsReference(t, url, prompt, n, refs[c.renorm])
			t.Logf("%q, top-5 logprobs within %.2g nats of the plain-Python MoE", answer, worst)
			if worst > 1e-3 {
				t.Errorf("the server's logprobs differ from the plain-Python MoE's by %.3g nats", worst)
			}
		})
	}
	if refs["on"].Text == refs["off"].Text {
		t.Errorf("renormalize on and off answer the same: %q", refs["on"].Text)
	}
}

// moeNote is one row of a committed run's NOTES.md verdict table: bmx's
// verdict as recorded ("correct*" where judged by shape only), what a
// reader of the cell's log and answers says the verdict should be, the KL
// against the reference as the notes give it ("-": none), and the
// explanation.
type moeNote struct {
	bmx, reader, kl, text string
}

// readMoENotes parses the verdict table of h200-moe/NOTES.md.
func readMoENotes(t *testing.T) map[string]moeNote {
	t.Helper()
	return readNotes(t, filepath.Join("h200-moe", "NOTES.md"))
}

// readNotes parses the verdict table of a committed run's NOTES.md: every
// row that starts with a backquoted cell id, in five columns (cell, bmx,
// right?, KL, what the log and the answers show), the right? column "yes"
// or "no: <verdict>", KL a number or "-".
func readNotes(t *testing.T, path string) map[string]moeNote {
	t.Helper()
	verdicts := map[string]bool{"correct": true, "correct*": true, "degraded": true, "wrong": true, "garbage": true,
		"nan": true, "crash": true, "hang": true, "inconclusive": true}
	notes := map[string]moeNote{}
	for i, line := range strings.Split(string(readFile(t, path)), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(cols) != 5 {
			t.Fatalf("NOTES.md:%d: %d columns, want 5 (cell, bmx, right?, KL, what the log and the answers show): %s", i+1, len(cols), line)
		}
		id := strings.Trim(cols[0], "`")
		n := moeNote{bmx: cols[1], reader: cols[1], kl: cols[3], text: cols[4]}
		if _, err := strconv.ParseFloat(n.kl, 64); err != nil && n.kl != "-" {
			t.Errorf("NOTES.md:%d: KL %q, want a number or -", i+1, n.kl)
		}
		if reader, ok := strings.CutPrefix(cols[2], "no: "); ok {
			n.reader = reader
		} else if cols[2] != "yes" {
			t.Errorf("NOTES.md:%d: right? is %q, want yes or no: <verdict>", i+1, cols[2])
		}
		if !verdicts[n.bmx] || !verdicts[n.reader] || (cols[2] != "yes" && n.reader == n.bmx) || n.text == "" {
			t.Errorf("NOTES.md:%d: bmx %q, reader %q, text %q", i+1, n.bmx, n.reader, n.text)
		}
		if _, dup := notes[id]; dup {
			t.Errorf("NOTES.md:%d: %s is explained twice", i+1, id)
		}
		notes[id] = n
	}
	return notes
}

// klShown is a cell's KL against the reference as the notes write it:
// "-" without one, else 3 significant digits ("0" for exactly 0).
func klShown(n *classify.Numerics) string {
	switch {
	case n == nil || n.Compared == 0 && n.KL == 0:
		return "-"
	case n.KL == 0:
		return "0"
	}
	return strconv.FormatFloat(n.KL, 'g', 3, 64)
}

// checkKL compares the notes' KL column with the KL of report.json
// (committed) and of the evidence judged again (now).
func checkKL(t *testing.T, notes map[string]moeNote, committed, now map[string]string) {
	t.Helper()
	for id, n := range notes {
		for what, kls := range map[string]map[string]string{"report.json": committed, "rejudged": now} {
			if got, ok := kls[id]; ok && got != normKL(n.kl) {
				t.Errorf("%s: %s: KL %s, NOTES.md says %s", what, id, got, n.kl)
			}
		}
	}
}

// normKL writes a KL column's number as klShown does (e-06 vs e-6).
func normKL(s string) string {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return klShown(&classify.Numerics{KL: v, Compared: 1})
}

// shown is a result's verdict as the grid shows it: correct* where it
// rests on the answers' shape alone.
func shown(verdict string, shapeOnly bool) string {
	if verdict == "correct" && shapeOnly {
		return "correct*"
	}
	return verdict
}

// recordedAs says whether a note says the cell was recorded on the H200
// as verdict v (then a verdict of its own: "as correct*" is not "as
// correct").
func recordedAs(text, v string) bool {
	for _, end := range []string{" ", ";", ","} {
		if strings.Contains(text, "Recorded on the H200 as "+v+end) {
			return true
		}
	}
	return false
}

// TestH200MoEReport checks the committed live MoE sweep (h200-moe/run, two
// calls, the second resumed) against the verdict table of h200-moe/NOTES.md,
// both ways (every cell explained, every row a cell): the verdicts recorded
// on the H200, the committed report.json's, and those this bmx's classifier
// gives the same evidence again. A crash row must quote the cell's recorded
// signature, and every cell's log must be there.
func TestH200MoEReport(t *testing.T) {
	t.Parallel()
	notes := readMoENotes(t)
	dir := filepath.Join("h200-moe", "run")
	readmeAgrees(t, storedCurrent(t, dir), dir, "| moe,dtype,renorm,gemm \\ pad")
	meta, err := record.ReadRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	const ref = "moe=naive,dtype=float32,renorm=on,gemm=dense,pad=0"
	if meta.Reference != ref || meta.Cells != 28 || meta.Resumed != 1 || meta.Host.GPU != "NVIDIA H200" {
		t.Errorf("run.json: reference %q, %d cells, resumed %d times, GPU %q", meta.Reference, meta.Cells, meta.Resumed, meta.Host.GPU)
	}
	run, err := record.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for _, r := range run.Results {
		recorded[r.Cell.ID] = shown(string(r.Verdict), r.ShapeOnly)
		if _, err := os.Stat(filepath.Join(dir, "logs", record.LogName(r.Cell, 1))); err != nil {
			t.Errorf("%s: %v", r.Cell.ID, err)
		}
		if r.Verdict == "crash" && !strings.Contains(notes[r.Cell.ID].text, r.Signature[:min(len(r.Signature), 39)]) {
			t.Errorf("%s: the notes do not quote its signature %q", r.Cell.ID, r.Signature)
		}
	}
	committed, committedKL := readReportJSON(t, filepath.Join("h200-moe", "report.json"))
	run.Rejudge()
	now, nowKL := map[string]string{}, map[string]string{}
	for _, r := range run.Results {
		now[r.Cell.ID] = shown(string(r.Verdict), r.ShapeOnly)
		nowKL[r.Cell.ID] = klShown(r.Numerics)
	}
	checkKL(t, notes, committedKL, nowKL)
	for _, got := range []struct {
		what     string
		verdicts map[string]string
	}{{"recorded", recorded}, {"report.json", committed}, {"rejudged", now}} {
		for id, n := range notes {
			if v, ok := got.verdicts[id]; !ok {
				t.Errorf("%s: NOTES.md explains %s, which is not a cell", got.what, id)
			} else if v != n.bmx && (got.what != "recorded" || !recordedAs(n.text, v)) {
				// The verdicts recorded on the H200 may differ from this
				// bmx's where the notes say what was recorded and why bmx
				// now judges otherwise.
				t.Errorf("%s: %s: %s, NOTES.md says %s", got.what, id, v, n.bmx)
			}
		}
		for id := range got.verdicts {
			if _, ok := notes[id]; !ok {
				t.Errorf("%s: %s is not explained in NOTES.md", got.what, id)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(notes)) {
		if n := notes[id]; n.reader != n.bmx {
			t.Logf("%s: bmx says %s, NOTES.md %s", id, n.bmx, n.reader)
		}
	}
}

// readReportJSON reads a committed report.json: each cell's verdict as the
// grid shows it and its KL as klShown writes it.
func readReportJSON(t *testing.T, path string) (verdicts, kls map[string]string) {
	t.Helper()
	var rep struct {
		Cells []struct {
			Cell struct {
				ID string `json:"id"`
			} `json:"cell"`
			Verdict   string             `json:"verdict"`
			ShapeOnly bool               `json:"shape_only"`
			Numerics  *classify.Numerics `json:"numerics"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(readFile(t, path), &rep); err != nil {
		t.Fatal(err)
	}
	verdicts, kls = map[string]string{}, map[string]string{}
	for _, c := range rep.Cells {
		verdicts[c.Cell.ID] = shown(c.Verdict, c.ShapeOnly)
		kls[c.Cell.ID] = klShown(c.Numerics)
	}
	return verdicts, kls
}

// TestMatrixMoEFaults: the fault sweep's matrix is three runners x three
// faults, with a broken group's cell as the reference, and passes the
// fault to the server as --moe-fault.
func TestMatrixMoEFaults(t *testing.T) {
	t.Parallel()
	cfg, err := matrix.LoadFile("moe-faults.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Cells) != 9 || plan.Reference != "moe=naive,fault=halve-combine" {
		t.Fatalf("%d cells, reference %q", len(plan.Cells), plan.Reference)
	}
	for _, c := range plan.Cells {
		f, _ := c.Value("fault")
		if i := slices.Index(c.Args, "--moe-fault"); i < 0 || c.Args[i+1] != f {
			t.Errorf("%s: args %v do not pass --moe-fault %s", c.ID, c.Args, f)
		}
	}
}
