package classify

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// story is a greedy probe's answer with no expectation: only agreement
// among cells can vouch for it.
func story(text string) evidence.Observation {
	return evidence.Observation{Probe: "story", Kind: evidence.Chat, Prompt: "Once upon a time", Text: text,
		FinishReason: "stop", HTTPStatus: 200}
}

const (
	goodStory  = "there was a little girl named Lily. She loved to play outside in the park with her friends every day."
	otherStory = "a big dog lived near the river. He liked to run after the ducks and bark at the boats all morning."
	thirdStory = "the king of a small country had three sons, and each of them wanted to be the next king of the land."
	salad      = "的 Lily пар parkschen 公园 ξ friends 友達 daytag"
)

// peer is a cell of a 3x3 grid (axes a and b) that answered text.
func peer(a, b, text string) Peer {
	return Peer{Cell: "a=" + a + ",b=" + b, Values: map[string]string{"a": a, "b": b},
		In: Input{Observations: []evidence.Observation{story(text)}}}
}

func TestAgreements(t *testing.T) {
	for _, tc := range []struct {
		name      string
		peers     []Peer
		reference string
		status    AgreementStatus
		yardstick string
		group     []string
		shared    map[string]string
	}{{
		name:      "the reference vouched for by cells on other values",
		peers:     []Peer{peer("1", "1", goodStory), peer("2", "2", goodStory), peer("3", "3", goodStory), peer("3", "1", salad)},
		reference: "a=1,b=1", status: RefConfirmed, yardstick: "a=1,b=1",
		group: []string{"a=1,b=1", "a=2,b=2", "a=3,b=3"},
	}, {
		name:      "agreeing cells all share a value",
		peers:     []Peer{peer("1", "1", goodStory), peer("2", "1", goodStory), peer("3", "2", salad)},
		reference: "a=1,b=1", status: RefConfirmed, yardstick: "a=1,b=1",
		group: []string{"a=1,b=1", "a=2,b=1"}, shared: map[string]string{"b": "1"},
	}, {
		name:      "the reference is the outlier of a larger group",
		peers:     []Peer{peer("1", "1", otherStory), peer("2", "2", goodStory), peer("1", "2", goodStory), peer("2", "1", goodStory)},
		reference: "a=1,b=1", status: RefOutlier, yardstick: "a=2,b=2",
		group: []string{"a=2,b=2", "a=1,b=2", "a=2,b=1"},
	}, {
		name:      "a larger group that avoids the reference's values does not outvote it: bmx cannot tell",
		peers:     []Peer{peer("1", "1", otherStory), peer("2", "2", goodStory), peer("3", "3", goodStory), peer("2", "3", goodStory)},
		reference: "a=1,b=1", status: Undecided,
	}, {
		name: "a larger group that shares a value the reference's lacks does not outvote it: bmx cannot tell",
		peers: []Peer{peer("1", "1", goodStory), peer("2", "1", goodStory),
			peer("1", "2", otherStory), peer("2", "2", otherStory), peer("3", "2", otherStory)},
		reference: "a=1,b=1", status: Undecided,
	}, {
		name:      "a garbage reference is no yardstick",
		peers:     []Peer{peer("1", "1", salad), peer("2", "2", goodStory), peer("3", "3", goodStory)},
		reference: "a=1,b=1", status: RefBroken, yardstick: "a=2,b=2",
		group: []string{"a=2,b=2", "a=3,b=3"},
	}, {
		name:      "a reference that did not run",
		peers:     []Peer{peer("2", "2", goodStory), peer("3", "3", goodStory)},
		reference: "a=1,b=1", status: RefBroken, yardstick: "a=2,b=2",
		group: []string{"a=2,b=2", "a=3,b=3"},
	}, {
		name:   "no reference configured",
		peers:  []Peer{peer("1", "1", otherStory), peer("2", "2", goodStory), peer("3", "3", goodStory)},
		status: NoReference, yardstick: "a=2,b=2",
		group: []string{"a=2,b=2", "a=3,b=3"},
	}, {
		name:      "groups of one and a broken reference: bmx cannot tell",
		peers:     []Peer{peer("1", "1", salad), peer("2", "2", goodStory), peer("3", "3", otherStory), peer("2", "3", thirdStory)},
		reference: "a=1,b=1", status: NoYardstick,
	}, {
		name:      "a tie between two groups and a broken reference: bmx cannot tell",
		peers:     []Peer{peer("1", "1", salad), peer("2", "2", goodStory), peer("3", "3", goodStory), peer("2", "3", otherStory), peer("3", "2", otherStory)},
		reference: "a=1,b=1", status: Undecided,
	}, {
		name:      "a tie between the reference's group and another: bmx cannot tell",
		peers:     []Peer{peer("2", "2", goodStory), peer("3", "3", goodStory), peer("2", "3", otherStory), peer("3", "2", otherStory)},
		reference: "a=2,b=2", status: Undecided,
	}, {
		name:      "a reference alone: nothing vouches for it, nothing outvotes it",
		peers:     []Peer{peer("1", "1", goodStory), peer("2", "2", otherStory), peer("3", "3", salad)},
		reference: "a=1,b=1", status: RefUnconfirmed, yardstick: "a=1,b=1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := Agreements(tc.peers, tc.reference)
			if a.Status != tc.status || a.Yardstick != tc.yardstick {
				t.Errorf("status %q yardstick %q, want %q %q (%s)", a.Status, a.Yardstick, tc.status, tc.yardstick, a.Note)
			}
			if !slices.Equal(a.Group, tc.group) {
				t.Errorf("group %v, want %v", a.Group, tc.group)
			}
			if len(a.Shared) != len(tc.shared) || fmt.Sprint(a.Shared) != fmt.Sprint(tc.shared) {
				t.Errorf("shared %v, want %v", a.Shared, tc.shared)
			}
			for _, m := range a.Group {
				if len(a.Vouched[m]) != min(len(a.Group)-1, maxVouchersNamed) || slices.Contains(a.Vouched[m], m) {
					t.Errorf("%s vouched for by %v", m, a.Vouched[m])
				}
			}
			if a.Note == "" {
				t.Error("no note")
			}
		})
	}
}

// TestAgreementNumerics: a drifting cell (the same words, logprobs that
// part beyond the healthy floor) is not vouched for by healthy cells, and as
// the reference it is the outlier.
func TestAgreementNumerics(t *testing.T) {
	withSteps := func(a, b string, p float64) Peer {
		pr := peer(a, b, goodStory)
		o := &pr.In.Observations[0]
		o.Logprobs = &evidence.Logprobs{}
		for _, w := range []string{"there", "was", "a", "little", "girl", "named", "Lily"} {
			o.Logprobs.Steps = append(o.Logprobs.Steps, evidence.Step{Token: w, Logprob: logf(p),
				Top: []evidence.Alt{{Token: w, Logprob: logf(p)}, {Token: "x", Logprob: logf(1 - p)}}})
		}
		o.Logprobs.Tokens = len(o.Logprobs.Steps)
		return pr
	}
	peers := []Peer{withSteps("1", "1", 0.6), withSteps("2", "2", 0.99), withSteps("1", "2", 0.99), withSteps("2", "1", 0.99)}
	a := Agreements(peers, "a=1,b=1")
	if a.Status != RefOutlier || a.Yardstick != "a=2,b=2" || slices.Contains(a.Group, "a=1,b=1") {
		t.Errorf("%+v: want the drifting reference the outlier", a)
	}
}

func logf(p float64) float64 { return math.Log(p) }

// TestAgreementTwins: a dedupe twin carries its source's evidence: it is
// vouched for as its source is, and cannot vouch for its source alone.
func TestAgreementTwins(t *testing.T) {
	twin := peer("2", "2", goodStory)
	twin.Follows = "a=1,b=1"
	a := Agreements([]Peer{peer("1", "1", goodStory), twin}, "a=1,b=1")
	if a.Status != RefUnconfirmed || len(a.Vouched["a=1,b=1"]) != 0 {
		t.Errorf("%+v: a twin vouched for its own source", a)
	}
	a = Agreements([]Peer{peer("1", "1", goodStory), twin, peer("3", "3", goodStory)}, "a=1,b=1")
	if !slices.Equal(a.Vouched["a=2,b=2"], a.Vouched["a=1,b=1"]) || len(a.Vouched["a=2,b=2"]) != 1 {
		t.Errorf("the twin's vouchers %v, its source's %v", a.Vouched["a=2,b=2"], a.Vouched["a=1,b=1"])
	}
}

// BenchmarkAgreements: 10,000 cells, half healthy and half different
// garbage, stay near linear (each cell meets at most maxLeaders leaders).
func BenchmarkAgreements(b *testing.B) {
	peers := make([]Peer, 10000)
	for i := range peers {
		text := goodStory
		if i%2 == 1 {
			text = fmt.Sprintf("%s %d %s", otherStory[:20+i%50], i, thirdStory[i%30:])
		}
		peers[i] = peer(fmt.Sprint(i/100), fmt.Sprint(i%100), text)
		peers[i].Verdict = Correct // as recorded: judging each cell is not agreement's cost
	}
	b.ResetTimer()
	for b.Loop() {
		Agreements(peers, peers[0].Cell)
	}
}

// grid is an n x n grid of cells on axes a and b (values "0".."n-1"),
// each answering text(a, b) ("" for a cell that crashed: left out).
func grid(n int, text func(a, b int) string) []Peer {
	var ps []Peer
	for a := range n {
		for b := range n {
			if t := text(a, b); t != "" {
				ps = append(ps, peer(fmt.Sprint(a), fmt.Sprint(b), t))
			}
		}
	}
	return ps
}

// TestAgreementInteractionBug: a bug in every path but the reference's.
// The reference's row and column are healthy; every cell off both gives
// the same fluent wrong story. The broken block outnumbers the healthy
// cells from 4x4 up, but all its members avoid the reference's values, so
// its agreement proves nothing: it never wins, whether the reference is
// correct, not configured, or crashed.
func TestAgreementInteractionBug(t *testing.T) {
	for _, n := range []int{4, 5} {
		for _, ref := range []string{"correct", "none", "crash"} {
			t.Run(fmt.Sprintf("%dx%d/%s", n, n, ref), func(t *testing.T) {
				peers := grid(n, func(a, b int) string {
					switch {
					case a == 0 && b == 0 && ref == "crash":
						return ""
					case a == 0 || b == 0:
						return goodStory
					}
					return otherStory
				})
				reference := "a=0,b=0"
				if ref == "none" {
					reference = ""
				}
				a := Agreements(peers, reference)
				yard := map[string]bool{}
				for _, c := range a.Group {
					yard[c] = true
				}
				for _, p := range peers {
					healthy := p.Values["a"] == "0" || p.Values["b"] == "0"
					if healthy != yard[p.Cell] {
						t.Errorf("%s (healthy %v) in the yardstick's group %v: %v", p.Cell, healthy, a.Group, yard[p.Cell])
					}
				}
				want := map[string]AgreementStatus{"correct": RefConfirmed, "none": NoReference, "crash": RefBroken}[ref]
				if a.Status != want {
					t.Errorf("status %s, want %s: %s", a.Status, want, a.Note)
				}
				broken := a.Groups[len(a.Groups)-1]
				if broken.Size != (n-1)*(n-1) || broken.Avoids["a"] != "0" || broken.Avoids["b"] != "0" {
					t.Errorf("the broken block %+v: want %d cells avoiding a=0 and b=0", broken, (n-1)*(n-1))
				}
				if !strings.Contains(a.Note, "which explains its agreement") {
					t.Errorf("the note does not say why the larger group lost: %s", a.Note)
				}
			})
		}
	}
}

// TestAgreementFaultGroups: three runners, a fault knob of three values
// (none, halved, dropped) applied the same way in every runner: three
// groups of three identical answers, each explained by the fault value its
// members share. Whichever group holds the reference, bmx cannot tell, and
// every answering cell is unconfirmed, none condemned.
func TestAgreementFaultGroups(t *testing.T) {
	texts := []string{goodStory, otherStory, thirdStory}
	var peers []Peer
	for r := range 3 {
		for f := range 3 {
			peers = append(peers, Peer{Cell: fmt.Sprintf("runner=%d,fault=%d", r, f), Values: map[string]string{"runner": fmt.Sprint(r), "fault": fmt.Sprint(f)},
				In: Input{Observations: []evidence.Observation{story(texts[f])}}})
		}
	}
	for f := range 3 {
		ref := fmt.Sprintf("runner=0,fault=%d", f)
		a := Agreements(peers, ref)
		if a.Status != Undecided || a.Yardstick != "" || len(a.Groups) != 3 {
			t.Fatalf("reference %s: %s yardstick %q %d groups, want cannot tell between 3: %s", ref, a.Status, a.Yardstick, len(a.Groups), a.Note)
		}
		for _, g := range a.Groups {
			if g.Size != 3 || len(g.Shares) != 1 {
				t.Errorf("reference %s: group %+v, want 3 cells sharing their fault value", ref, g)
			}
		}
		if !a.Groups[0].Reference || len(a.Unconfirmed) != 9 || a.UnconfirmedReason(ref) == "" {
			t.Errorf("reference %s: %+v", ref, a)
		}
		for _, want := range []string{"cannot tell", "fault=", "expected answer", "--baseline"} {
			if !strings.Contains(a.Note, want) {
				t.Errorf("the note lacks %q: %s", want, a.Note)
			}
		}
	}
}

// TestAgreementGuardForEveryGroup: a drifting reference whose healthy
// peers all share a value it lacks is no yardstick either: nothing vouches
// for it, and their agreement is explained by that value. bmx cannot tell.
func TestAgreementGuardForEveryGroup(t *testing.T) {
	peers := []Peer{peer("1", "1", otherStory), peer("1", "2", goodStory), peer("2", "2", goodStory), peer("3", "2", goodStory)}
	a := Agreements(peers, "a=1,b=1")
	if a.Status != Undecided || a.Groups[1].Shares["b"] != "2" {
		t.Errorf("%s: %s", a.Status, a.Note)
	}
}

// TestWholeAgree: a right first sentence that runs into fluent nonsense
// does not agree; a healthy parting at a near tie (both sides ranked the
// other's token close to their own, numerics within the floor before it)
// does; a parting where the reference found the token unlikely does not.
func TestWholeAgree(t *testing.T) {
	steps := func(words []string, chosen float64, alt string, altP float64, at int) *evidence.Logprobs {
		l := &evidence.Logprobs{}
		for i, w := range words {
			top := []evidence.Alt{{Token: w, Logprob: logf(chosen)}, {Token: "zz", Logprob: logf(1 - chosen)}}
			if i == at {
				top[1] = evidence.Alt{Token: alt, Logprob: logf(altP)}
			}
			l.Steps = append(l.Steps, evidence.Step{Token: w, Logprob: top[0].Logprob, Top: top})
		}
		l.Tokens = len(l.Steps)
		return l
	}
	ref := story("there was a little girl named Lily who loved the park.")
	ref.Logprobs = steps(strings.Fields(ref.Text), 0.5, "boy", 0.49, 4)
	nonsense := story("there was a little girl named Lily whose spoon taxed the violet mountain of Tuesdays.")
	if ok, _ := WholeAgree(nonsense, ref); ok {
		t.Error("a right first sentence then fluent nonsense agrees (no logprobs)")
	}
	nonsense.Logprobs = steps(strings.Fields(nonsense.Text), 0.5, "zz", 0.49, 99)
	if ok, why := WholeAgree(nonsense, ref); ok {
		t.Errorf("a right first sentence then fluent nonsense agrees: %s", why)
	}
	tie := story("there was a little boy named Tom who loved the park.")
	tie.Logprobs = steps(strings.Fields(tie.Text), 0.5, "girl", 0.49, 4)
	if ok, why := WholeAgree(tie, ref); !ok {
		t.Errorf("a healthy near-tie parting disagrees: %s", why)
	}
	far := story("there was a little boy named Tom who loved the park.")
	far.Logprobs = steps(strings.Fields(far.Text), 0.5, "girl", 0.49, 4)
	ref.Logprobs.Steps[4].Top[1] = evidence.Alt{Token: "boy", Logprob: logf(0.01)}
	if ok, why := WholeAgree(far, ref); ok {
		t.Errorf("a parting at a token the reference found unlikely agrees: %s", why)
	}
}

// TestAgreementOneBrokenValue: one value of one axis gives its own fluent
// answer in every cell (a single broken kernel). The cells on the other
// values agree across several of them, which no fault in one value
// explains; the broken value's cells share it. The reference is confirmed
// and the broken value's cells are judged against it, on 4x4 and 10x10,
// and with one stray cell among the healthy ones.
func TestAgreementOneBrokenValue(t *testing.T) {
	for _, tc := range []struct {
		n     int
		stray bool
	}{{4, false}, {10, false}, {3, true}, {4, true}} {
		t.Run(fmt.Sprintf("%dx%d stray %v", tc.n, tc.n, tc.stray), func(t *testing.T) {
			broken := tc.n - 1
			peers := grid(tc.n, func(a, b int) string {
				switch {
				case b == broken:
					return otherStory
				case tc.stray && a == tc.n-1 && b == 0:
					return thirdStory
				}
				return goodStory
			})
			a := Agreements(peers, "a=0,b=0")
			if a.Status != RefConfirmed || slices.ContainsFunc(a.Group, func(c string) bool { return strings.HasSuffix(c, fmt.Sprintf("b=%d", broken)) }) {
				t.Errorf("%s, group %v: %s", a.Status, a.Group, a.Note)
			}
		})
	}
}

// TestAgreementInteractionOddReference: the interaction bug where the
// reference itself took another path (a tie without logprobs to show it):
// the healthy row and column still outweigh the block, which avoids the
// reference's values; with two more odd cells on the row and column the
// groups cannot be told apart, and no cell is condemned.
func TestAgreementInteractionOddReference(t *testing.T) {
	peers := grid(4, func(a, b int) string {
		switch {
		case a == 0 && b == 0:
			return thirdStory
		case a == 0 || b == 0:
			return goodStory
		}
		return otherStory
	})
	a := Agreements(peers, "a=0,b=0")
	if a.Status != RefOutlier || slices.Contains(a.Group, "a=1,b=1") || !slices.Contains(a.Group, "a=0,b=1") {
		t.Errorf("odd reference: %s, group %v: %s", a.Status, a.Group, a.Note)
	}
	peers = grid(4, func(a, b int) string {
		switch {
		case a == 0 && b == 2, a == 2 && b == 0:
			return thirdStory
		case a == 0 || b == 0:
			return goodStory
		}
		return otherStory
	})
	if a := Agreements(peers, "a=0,b=0"); a.Status == RefOutlier || slices.Contains(a.Group, "a=1,b=1") {
		t.Errorf("two odd cells: %s, group %v: %s", a.Status, a.Group, a.Note)
	}
}

// TestAgreementLeaderCap: more cells that agree with no one than there are
// leaders, before the healthy ones: the healthy cells still form their
// group and win.
func TestAgreementLeaderCap(t *testing.T) {
	var peers []Peer
	for i := range 134 {
		text := goodStory
		switch {
		case i < 2:
			text = thirdStory
		case i < 34:
			text = fmt.Sprintf("a small fox number %d ran %s", i, otherStory)
		}
		peers = append(peers, peer(fmt.Sprint(i/10), fmt.Sprint(i%10), text))
	}
	a := Agreements(peers, "")
	if a.Status != NoReference || len(a.Group) != 100 {
		t.Errorf("%s, group of %d: %s", a.Status, len(a.Group), a.Note)
	}
}

// BenchmarkAgreementsLogprobs: 10,000 cells with the same greedy answers
// to three probes of 96 tokens with top-5 logprobs, in 40 clusters of
// numerics just past the healthy floor from each other: every cell is
// compared with each leader token by token.
func BenchmarkAgreementsLogprobs(b *testing.B) {
	words := strings.Fields(strings.Repeat(goodStory+" ", 6))[:96]
	text := strings.Join(words, " ")
	peers := make([]Peer, 10000)
	for i := range peers {
		p := 0.99 - 0.004*float64(i%40)
		var obs []evidence.Observation
		for _, name := range []string{"once", "lily", "sun"} {
			o := story(text)
			o.Probe = name
			o.Logprobs = &evidence.Logprobs{Tokens: len(words)}
			for _, w := range words {
				top := []evidence.Alt{{Token: w, Logprob: logf(p)}, {Token: "a", Logprob: logf((1 - p) / 2)}, {Token: "b", Logprob: logf((1 - p) / 4)},
					{Token: "c", Logprob: logf((1 - p) / 8)}, {Token: "d", Logprob: logf((1 - p) / 16)}}
				o.Logprobs.Steps = append(o.Logprobs.Steps, evidence.Step{Token: w, Logprob: top[0].Logprob, Top: top})
			}
			obs = append(obs, o)
		}
		peers[i] = Peer{Cell: fmt.Sprint(i), Values: map[string]string{"a": fmt.Sprint(i / 100), "b": fmt.Sprint(i % 100)},
			In: Input{Observations: obs}, Verdict: Correct}
	}
	b.ResetTimer()
	for b.Loop() {
		Agreements(peers, peers[0].Cell)
	}
}
