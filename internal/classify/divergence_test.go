package classify

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// recorded is examples/llamacpp/testdata/once-logprobs.json: the greedy
// top-5 logprobs real llama.cpp gave for one probe in four cells.
type recorded struct {
	Cells []struct {
		Cell    string          `json:"cell"`
		Verdict Verdict         `json:"verdict"`
		Text    string          `json:"text"`
		Steps   []evidence.Step `json:"steps"`
	} `json:"cells"`
}

func loadRecorded(t *testing.T) recorded {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "llamacpp", "testdata", "once-logprobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Cells) != 4 {
		t.Fatalf("%d cells recorded", len(r.Cells))
	}
	return r
}

func greedyObservation(name, text string, steps []evidence.Step) evidence.Observation {
	tokens := len(steps)
	return evidence.Observation{Probe: name, Kind: evidence.Chat, Prompt: "Once upon a time", Text: text, HTTPStatus: 200,
		FinishReason: "length", Tokens: &tokens, Logprobs: &evidence.Logprobs{Tokens: len(steps), Steps: steps}}
}

// cellInput is the recorded cell i judged against the recorded reference.
func (r recorded) cellInput(i int) Input {
	ref := r.Cells[0]
	c := r.Cells[i]
	return Input{
		Observations: []evidence.Observation{greedyObservation("once", c.Text, c.Steps)},
		Reference:    &Reference{Cell: ref.Cell, Observations: []evidence.Observation{greedyObservation("once", ref.Text, ref.Steps)}},
	}
}

// TestRecordedLlamaCpp judges real llama.cpp logprobs: f32 and bf16 K
// caches against the f16 reference are healthy, the quantized K cache
// without flash attention (which produces garbage) is far off.
func TestRecordedLlamaCpp(t *testing.T) {
	r := loadRecorded(t)
	for i, c := range r.Cells[1:] {
		n := compareWithReference(r.cellInput(i + 1))
		if n == nil || len(n.Probes) != 1 {
			t.Fatalf("%s: numerics %+v", c.Cell, n)
		}
		quantK := strings.Contains(c.Cell, "cache_k=q")
		t.Logf("%s: %s (max %.3g)", c.Cell, n.figure(), n.MaxKL)
		switch {
		case quantK && n.KL <= DegradedKL:
			t.Errorf("%s produces garbage, but its divergence %.3g is not above %g", c.Cell, n.KL, DegradedKL)
		case !quantK && n.KL >= DegradedKL/20:
			t.Errorf("%s is healthy, but its divergence %.3g is not far below %g", c.Cell, n.KL, DegradedKL)
		}
		// The first difference is where the greedy tokens part, and the
		// texts agree up to it.
		ref := r.Cells[0].Steps
		var prefix strings.Builder
		for j := range min(len(ref), len(c.Steps)) {
			if ref[j].Token != c.Steps[j].Token {
				if n.FirstDiff == nil || *n.FirstDiff != j {
					t.Errorf("%s: first diff %v, the tokens part at %d", c.Cell, n.FirstDiff, j)
				}
				if n.Compared != j+1 {
					t.Errorf("%s: %d positions compared, want the %d of the shared prefix and the first difference", c.Cell, n.Compared, j+1)
				}
				break
			}
			prefix.WriteString(ref[j].Token)
		}
		if !strings.HasPrefix(c.Text, prefix.String()) || !strings.HasPrefix(r.Cells[0].Text, prefix.String()) {
			t.Errorf("%s: the shared prefix %q is not both texts' start", c.Cell, prefix.String())
		}
	}
}

// TestStepKLBound checks the estimator against the exact KL of full
// distributions: never above it (it is a coarse-graining), equal to it
// when the top-k hold the whole vocabulary, 0 for equal distributions.
func TestStepKLBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const vocab = 40
	dist := func(logits []float64) []evidence.Alt {
		var z float64
		for _, l := range logits {
			z += math.Exp(l)
		}
		alts := make([]evidence.Alt, len(logits))
		for i, l := range logits {
			alts[i] = evidence.Alt{Token: string(rune('a' + i)), Logprob: l - math.Log(z)}
		}
		slices.SortFunc(alts, func(a, b evidence.Alt) int { return cmp.Compare(b.Logprob, a.Logprob) })
		return alts
	}
	exact := func(p, q []evidence.Alt) float64 {
		qm := probs(q)
		var kl float64
		for _, a := range p {
			kl += math.Exp(a.Logprob) * (a.Logprob - math.Log(qm[a.Token]))
		}
		return kl
	}
	for trial := range 500 {
		lp, lq := make([]float64, vocab), make([]float64, vocab)
		scale := []float64{0.5, 2, 6}[trial%3] // flat to peaked
		noise := []float64{0, 0.01, 0.3, 2}[trial%4]
		for i := range lp {
			lp[i] = rng.NormFloat64() * scale
			lq[i] = lp[i] + rng.NormFloat64()*noise
		}
		p, q := dist(lp), dist(lq)
		want := exact(p, q)
		for _, k := range []int{1, 2, 5, 20, vocab} {
			got := stepKL(p[:k], q[:k])
			if got < 0 || got > want+1e-9 {
				t.Fatalf("trial %d k=%d: estimate %.6g outside [0, exact %.6g]", trial, k, got, want)
			}
			// Exact up to kProbFloor, which caps the terms of tokens that
			// are all but impossible in the cell.
			if k == vocab && math.Abs(got-want) > 1e-6 {
				t.Fatalf("trial %d: the whole vocabulary gives %.9g, exact %.9g", trial, got, want)
			}
		}
		if got := stepKL(p[:5], p[:5]); got > 1e-12 {
			t.Fatalf("trial %d: a distribution against itself gives %g", trial, got)
		}
	}
	// Mass moved off the only shared token still counts.
	ref := []evidence.Alt{{Token: "a", Logprob: math.Log(0.95)}, {Token: "b", Logprob: math.Log(0.04)}}
	cell := []evidence.Alt{{Token: "a", Logprob: math.Log(0.6)}, {Token: "c", Logprob: math.Log(0.3)}}
	if got := stepKL(ref, cell); got < 0.3 {
		t.Errorf("chosen token 0.95 -> 0.6: estimate %.3g", got)
	}
}

// TestCompareNumericsVerdicts: only a correct cell turns degraded, and only
// beyond the threshold; every other verdict stays.
func TestCompareNumericsVerdicts(t *testing.T) {
	r := loadRecorded(t)
	healthy, broken := r.cellInput(2), r.cellInput(3) // bf16, q8_0
	for _, v := range Verdicts {
		j := Judgement{Verdict: v, Reason: "all 1 probes answered as expected"}
		compareNumerics(&j, broken)
		want := v
		if v == Correct {
			want = Degraded
		}
		if j.Verdict != want || j.Numerics == nil {
			t.Errorf("%s with broken numerics became %s (numerics %v)", v, j.Verdict, j.Numerics)
		}
		j = Judgement{Verdict: v}
		compareNumerics(&j, healthy)
		if j.Verdict != v || j.Numerics == nil {
			t.Errorf("%s with healthy numerics became %s", v, j.Verdict)
		}
	}
	j := Judgement{Verdict: Correct, Reason: "all 1 probes answered as expected"}
	compareNumerics(&j, broken)
	for _, s := range []string{r.Cells[0].Cell, "KL ", fmt.Sprintf("nats/token (threshold %g)", DegradedKL), "first differing token at", "all 1 probes answered as expected"} {
		if !strings.Contains(j.Reason, s) {
			t.Errorf("reason %q lacks %q", j.Reason, s)
		}
	}
	if j.Signature != numericsSignature || !strings.HasPrefix(j.Evidence, "once: KL ") {
		t.Errorf("signature %q evidence %q", j.Signature, j.Evidence)
	}
	if _, err := json.Marshal(j); err != nil {
		t.Error(err)
	}

	// No numerics without a reference, for a sampled answer, or when
	// either side lacks top-k logprobs.
	noRef := broken
	noRef.Reference = nil
	sampled := broken
	temp := float32(0.8)
	sampled.Observations = slices.Clone(broken.Observations)
	sampled.Observations[0].Temperature = &temp
	bare := broken
	bare.Reference = &Reference{Cell: "ref", Observations: []evidence.Observation{greedyObservation("once", r.Cells[0].Text, nil)}}
	other := broken
	other.Reference = &Reference{Cell: "ref", Observations: []evidence.Observation{greedyObservation("lily", r.Cells[0].Text, r.Cells[0].Steps)}}
	for name, in := range map[string]Input{"no reference": noRef, "sampled": sampled, "reference without logprobs": bare, "other probe": other} {
		j := Judgement{Verdict: Correct}
		compareNumerics(&j, in)
		if j.Numerics != nil || j.Verdict != Correct {
			t.Errorf("%s: %s, numerics %+v", name, j.Verdict, j.Numerics)
		}
	}
}

// TestDegradedCell goes through Cell: a cell whose answer passes but whose
// logprobs are the broken cell's is degraded, with the figures attached.
func TestDegradedCell(t *testing.T) {
	r := loadRecorded(t)
	math := func(steps []evidence.Step) evidence.Observation {
		o := greedyObservation("math", "300 + 23 = 323", steps)
		o.Prompt, o.Expect, o.FinishReason = "What is 300+23?", evidence.Number(323), "stop"
		return o
	}
	ref := &Reference{Cell: r.Cells[0].Cell, Observations: []evidence.Observation{math(r.Cells[0].Steps)}}
	j := Cell(Input{Observations: []evidence.Observation{math(r.Cells[3].Steps)}, Reference: ref})
	if j.Verdict != Degraded || j.Numerics == nil || j.Numerics.KL <= DegradedKL || j.Numerics.Reference != r.Cells[0].Cell {
		t.Errorf("%s (%s), numerics %+v", j.Verdict, j.Reason, j.Numerics)
	}
	j = Cell(Input{Observations: []evidence.Observation{math(r.Cells[1].Steps)}, Reference: ref})
	if j.Verdict != Correct || j.Numerics == nil || j.Numerics.KL >= DegradedKL {
		t.Errorf("f32: %s (%s), numerics %+v", j.Verdict, j.Reason, j.Numerics)
	}
}
