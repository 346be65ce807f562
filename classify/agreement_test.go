package classify

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/bmx-dev/bmx/evidence"
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
		peers:     []Peer{peer("1", "1", otherStory), peer("2", "2", goodStory), peer("3", "3", goodStory), peer("2", "3", goodStory)},
		reference: "a=1,b=1", status: RefOutlier, yardstick: "a=2,b=2",
		group: []string{"a=2,b=2", "a=3,b=3", "a=2,b=3"},
	}, {
		name: "a larger group that shares a value the reference lacks does not outvote it",
		peers: []Peer{peer("1", "1", goodStory), peer("2", "1", goodStory),
			peer("1", "2", otherStory), peer("2", "2", otherStory), peer("3", "2", otherStory)},
		reference: "a=1,b=1", status: RefConfirmed, yardstick: "a=1,b=1",
		group: []string{"a=1,b=1", "a=2,b=1"}, shared: map[string]string{"b": "1"},
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
		reference: "a=1,b=1", status: NoYardstick,
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
	peers := []Peer{withSteps("1", "1", 0.6), withSteps("2", "2", 0.99), withSteps("3", "3", 0.99), withSteps("2", "3", 0.99)}
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
