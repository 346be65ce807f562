package classify

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// h200Cells reads the live H200 sweep's evidence
// (examples/torch-gpu/h200/run/results.jsonl): each cell's observations by
// cell ID.
func h200Cells(t *testing.T) map[string][]evidence.Observation {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "examples", "torch-gpu", "h200", "run", "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cells := map[string][]evidence.Observation{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r struct {
			Cell struct {
				ID string `json:"id"`
			} `json:"cell"`
			Observations []evidence.Observation `json:"observations"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		cells[r.Cell.ID] = r.Observations
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cells
}

const h200Reference = "attention=math,dtype=float32,gemm=dense"

func probeOf(t *testing.T, obs []evidence.Observation, name string) evidence.Observation {
	t.Helper()
	for _, o := range obs {
		if o.Probe == name {
			return o
		}
	}
	t.Fatalf("no probe %s", name)
	return evidence.Observation{}
}

// judgeWithReference judges one request the way a sweep does, against the
// reference cell's answer to it.
func judgeWithReference(o, ro evidence.Observation) (Verdict, string) {
	v, reason, _ := Observation(o)
	ref := &Reference{Cell: h200Reference, Observations: []evidence.Observation{ro}}
	v, reason, _ = ref.compare(o, v, reason)
	return v, reason
}

// TestH200NearTies: every greedy path of a real fp8 or bf16 cell that parts
// from the float32 reference parts at a near tie, and the story probes of
// those cells are never wrong or garbage for it.
func TestH200NearTies(t *testing.T) {
	cells := h200Cells(t)
	ref := cells[h200Reference]
	parted := 0
	for id, obs := range cells {
		if id == h200Reference {
			continue
		}
		for _, o := range obs {
			if !comparable(o) {
				continue
			}
			ro := probeOf(t, ref, o.Probe)
			p := compareSteps(o.Logprobs.Steps, ro.Logprobs.Steps)
			if p.FirstDiff == nil {
				continue
			}
			parted++
			if why, ok := partedOnNearTie(o, ro); !ok {
				t.Errorf("%s %s: parts at %d, not a near tie", id, o.Probe, *p.FirstDiff)
			} else if !strings.HasPrefix(why, "at token ") {
				t.Errorf("%s %s: %q", id, o.Probe, why)
			}
			if v, reason := judgeWithReference(o, ro); v != Correct && v != Degraded {
				t.Errorf("%s %s: %s (%s)", id, o.Probe, v, reason)
			}
		}
	}
	if parted < 20 {
		t.Errorf("only %d greedy partings in the H200 evidence", parted)
	}
}

// TestH200PartingsThatAreNot: the same real answers, changed where a broken
// kernel would differ, are not excused as near ties.
func TestH200PartingsThatAreNot(t *testing.T) {
	cells := h200Cells(t)
	ref := cells[h200Reference]
	const fp8 = "attention=math,dtype=float16,gemm=fp8" // its sun answer parts at token 0
	const looping = "attention=efficient,dtype=bfloat16,gemm=fp8"

	t.Run("recorded", func(t *testing.T) {
		for _, id := range []string{fp8, looping} {
			o := probeOf(t, cells[id], "sun")
			if v, reason := judgeWithReference(o, probeOf(t, ref, "sun")); v != Degraded {
				t.Errorf("%s: %s (%s), want degraded", id, v, reason)
			}
		}
	})
	t.Run("a token the reference did not rank", func(t *testing.T) {
		o := clone(probeOf(t, cells[fp8], "sun"))
		o.Logprobs.Steps[0].Token = " purple"
		o.Logprobs.Steps[0].Top[0].Token = " purple"
		if v, reason := judgeWithReference(o, probeOf(t, ref, "sun")); v != Wrong {
			t.Errorf("%s (%s), want wrong", v, reason)
		}
	})
	t.Run("a token far below the reference's choice", func(t *testing.T) {
		ro := clone(probeOf(t, ref, "sun"))
		for i, a := range ro.Logprobs.Steps[0].Top {
			if a.Token == probeOf(t, cells[fp8], "sun").Logprobs.Steps[0].Token {
				ro.Logprobs.Steps[0].Top[i].Logprob = ro.Logprobs.Steps[0].Logprob - 1.5
			}
		}
		if v, reason := judgeWithReference(probeOf(t, cells[fp8], "sun"), ro); v != Wrong {
			t.Errorf("%s (%s), want wrong", v, reason)
		}
	})
	t.Run("a shared prefix whose numerics are broken", func(t *testing.T) {
		// The cell's "lily" answer parts at 58; make every step before it
		// put its mass elsewhere.
		o := clone(probeOf(t, cells[fp8], "lily"))
		for i := range o.Logprobs.Steps[:20] {
			for j := range o.Logprobs.Steps[i].Top {
				o.Logprobs.Steps[i].Top[j].Logprob -= 2
			}
		}
		if why, ok := partedOnNearTie(o, probeOf(t, ref, "lily")); ok {
			t.Errorf("called a near tie: %s", why)
		}
	})
	t.Run("a loop the reference does not have", func(t *testing.T) {
		ro := clone(probeOf(t, ref, "sun"))
		ro.Text = " the birds were singing. Tom ran to the park with his red kite and his dog Max. They played all day until the sun went down."
		if v, reason := judgeWithReference(probeOf(t, cells[looping], "sun"), ro); v != Garbage {
			t.Errorf("%s (%s), want garbage", v, reason)
		}
	})
}

// clone deep-copies an observation's logprobs, so a subtest can change them.
func clone(o evidence.Observation) evidence.Observation {
	lp := *o.Logprobs
	lp.Steps = make([]evidence.Step, len(o.Logprobs.Steps))
	for i, s := range o.Logprobs.Steps {
		s.Top = append([]evidence.Alt(nil), s.Top...)
		lp.Steps[i] = s
	}
	o.Logprobs = &lp
	return o
}
