package classify

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/bmx-dev/bmx/evidence"
)

// Peer is one judged cell as agreement among cells reads it.
type Peer struct {
	Cell string
	// Values are the cell's axis values (axis name to value).
	Values map[string]string
	// In is the cell's recorded evidence; its Reference is ignored.
	In Input
	// Verdict is the cell's verdict as judged (against the configured
	// reference, if any); "" has it judged here. A reference only ever
	// turns a correct answer wrong or degraded, so only those are judged
	// again without it.
	Verdict Verdict
	// Follows names the cell whose evidence this one carries (a dedupe
	// twin): it shares that cell's server, so it neither vouches nor counts.
	Follows string
	// Apart says why the cell's evidence is not comparable with the
	// others' (it ran on a host whose driver or packages differ): it is
	// judged against the yardstick like any cell, but neither vouches nor
	// counts.
	Apart string
}

// AgreementStatus says how the yardstick of a sweep was chosen.
type AgreementStatus string

// Agreement statuses.
const (
	// RefConfirmed: the reference's greedy answers are shared by other
	// cells, so the cells vouch for it and it stays the yardstick.
	RefConfirmed AgreementStatus = "confirmed"
	// RefUnconfirmed: the reference passes but no other cell shares its
	// greedy answers, and no group of agreeing cells disagrees with it.
	RefUnconfirmed AgreementStatus = "unconfirmed"
	// RefOutlier: the reference passes but a larger group of cells agree
	// with each other and not with it, and nothing in the group's make-up
	// explains their agreement; the group is the yardstick.
	RefOutlier AgreementStatus = "outlier"
	// RefBroken: the reference failed (or did not run); the group of
	// agreeing cells that wins is the yardstick.
	RefBroken AgreementStatus = "broken"
	// NoReference: none is configured; the group of agreeing cells that
	// wins is the yardstick.
	NoReference AgreementStatus = "no-reference"
	// NoYardstick: no two answering cells agree and the reference cannot
	// be the yardstick: bmx cannot tell which answers are right, and
	// judges greedy answers by their shape only.
	NoYardstick AgreementStatus = "split"
	// Undecided: groups of agreeing cells (the reference counts as one)
	// disagree, and each group's agreement is explained by its make-up (a
	// value all its members share or all avoid), or the largest tie: bmx
	// cannot tell which group is right. Their cells are correct*
	// (unconfirmed), none is condemned on agreement alone.
	Undecided AgreementStatus = "cannot-tell"
)

// Agreement is what the cells' greedy answers say about one another. A
// zero Status means no cell answered a greedy probe: nothing to agree on.
type Agreement struct {
	// Reference is the configured reference cell ("" for none).
	Reference string `json:"reference,omitempty"`
	// Yardstick is the cell the others are judged against ("" for none).
	Yardstick string          `json:"yardstick,omitempty"`
	Status    AgreementStatus `json:"status"`
	// Baseline names the verified yardstick of an earlier run of the same
	// model and probe set ("baseline RUN:cell") the cells were judged
	// against because this agreement left them none (the run's record sets
	// it, and Yardstick to it; "" otherwise).
	Baseline string `json:"baseline,omitempty"`
	// Group is the chosen group of cells whose greedy answers agree, the
	// yardstick's group (empty when no two cells agree or none is chosen).
	Group []string `json:"group,omitempty"`
	// Shared are the axis values every member of Group has: agreement
	// proves only what varied, so a fault in one of these would not show.
	Shared map[string]string `json:"shared,omitempty"`
	// Groups are the groups that were weighed against each other (the
	// reference's, alone or not, and every group of two or more agreeing
	// cells), the chosen one first.
	Groups []Group `json:"groups,omitempty"`
	// Note says it in a sentence for reports.
	Note string `json:"note"`
	// Decide says, when bmx cannot tell, what would decide it.
	Decide string `json:"decide,omitempty"`
	// Vouched maps a member of Group to the first maxVouchersNamed other
	// members (its vouchers; it has len(Group)-1 in all).
	Vouched map[string][]string `json:"-"`
	// Unconfirmed maps each answering cell of an undecided contest to the
	// group it belongs to (an index into Groups).
	Unconfirmed map[string]int `json:"-"`
}

// Group is a set of answering cells whose greedy answers agree, as the
// agreement step weighed it against the others.
type Group struct {
	// Cells are the first maxGroupNamed members; Size counts them all.
	Cells []string `json:"cells"`
	Size  int      `json:"size"`
	// Reference marks the configured reference's group.
	Reference bool `json:"reference,omitempty"`
	// Shares are axis values every member has and some answering cell
	// outside the group lacks; Avoids are values no member has and some
	// answering cell outside has. Either explains the group's agreement
	// by its make-up: a fault in that value (or in everything but it)
	// would make all its members agree.
	Shares map[string]string `json:"shares,omitempty"`
	Avoids map[string]string `json:"avoids,omitempty"`
}

// Explained reports a group whose agreement its make-up explains.
func (g Group) Explained() bool { return len(g.Shares)+len(g.Avoids) > 0 }

// makeUp says what the group's members share or avoid, in words: "all use
// fault=halved; none uses moe_runner=a".
func (g Group) makeUp() string {
	var parts []string
	for _, kv := range sortedPairs(g.Shares) {
		parts = append(parts, "all use "+kv)
	}
	for _, kv := range sortedPairs(g.Avoids) {
		parts = append(parts, "none uses "+kv)
	}
	return strings.Join(parts, ", ")
}

// Agreement sizes.
const (
	// maxLeaders bounds the groups formed: each answering cell is compared
	// with at most this many leaders (the first cells that agreed with no
	// earlier leader), so ten thousand cells of ten thousand different
	// garbage stay linear.
	maxLeaders = 32
	// maxVouchersNamed caps the cells named as vouchers of one cell.
	maxVouchersNamed = 3
	// maxGroupNamed caps the cells a weighed group names.
	maxGroupNamed = 20
)

// answers is one cell's greedy answers without an expectation, by probe
// and request.
type answers map[string]evidence.Observation

// greedyAnswers are the answers of a cell's greedy probes without an
// expectation: what two healthy kernel paths should both produce. (Probes
// with an expectation are compared by their numerics only: every
// answering cell met their expectations.)
func greedyAnswers(obs []evidence.Observation) answers {
	a := answers{}
	for _, o := range obs {
		if greedy(o) && o.Expect == nil {
			a[fmt.Sprintf("%s#%d", o.Probe, o.Request)] = o
		}
	}
	return a
}

// greedy reports an answered chat request sampled greedily.
func greedy(o evidence.Observation) bool {
	return o.Answered() && o.Kind != evidence.ModelInfo && (o.Temperature == nil || *o.Temperature == 0)
}

// hasSteps says whether some greedy probe of the cell has top-k logprobs
// to compare.
func hasSteps(obs []evidence.Observation) bool {
	for _, o := range obs {
		if comparable(o) {
			return true
		}
	}
	return false
}

// answerText is a greedy answer's text as agreement compares it: the
// answer without its thinking, trimmed.
func answerText(o evidence.Observation) string {
	ans, _ := SplitThinking(o.Text)
	return strings.TrimSpace(ans)
}

// key is a canonical form of the answers, equal for equal answer texts.
func (a answers) key() string {
	ks := make([]string, 0, len(a))
	for k := range a {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(answerText(a[k]))
		b.WriteByte(0)
	}
	return b.String()
}

// agrees says whether every greedy answer both cells gave agrees as a
// whole (WholeAgree), and how many they gave in common.
func (a answers) agrees(b answers) (bool, int) {
	common := 0
	for k, x := range a {
		y, ok := b[k]
		if !ok {
			continue
		}
		common++
		if ok, _ := WholeAgree(x, y); !ok {
			return false, common
		}
	}
	return true, common
}

// WholeAgree says whether two greedy answers to the same request agree as
// wholes: the same text, or tokens that part at a near tie (each side
// ranked the other's token within nearTieNats of its own) with numerics
// within the healthy floor (DegradedKL) up to that point (the parting
// position included, as the judge against the reference measures it). Texts that part
// anywhere else disagree, whatever their first words: a cell whose first
// sentence is right and which then runs into fluent nonsense does not
// agree. The string says where and how they parted ("" when the texts are
// equal).
func WholeAgree(o, ro evidence.Observation) (bool, string) {
	if answerText(o) == answerText(ro) {
		return true, ""
	}
	if !comparable(o) || !comparable(ro) {
		return false, "the texts differ and there are no logprobs to tell a near tie"
	}
	tie, ok := partedOnNearTie(o, ro)
	if !ok {
		return false, "the tokens part where neither side had a near tie"
	}
	_, back := partedOnNearTie(ro, o)
	if !back {
		return false, "the tokens part where only one side had a near tie"
	}
	if kl := prefixKL(o, ro); kl > DegradedKL {
		return false, fmt.Sprintf("they part %s, but the numerics before it diverge (KL %.2g nats/token, threshold %g)", tie, kl, DegradedKL)
	}
	return true, "parts " + tie
}

// member is an answering cell: its index among the peers, its greedy
// answers and their canonical key, and its comparable greedy answers'
// logprob steps with their probabilities worked out once (each cell meets
// up to maxLeaders leaders).
type member struct {
	peer    int
	answers answers
	key     string
	steps   []probeSteps
	// forced is set when the cell scored some answer of another cell
	// (teacher forcing): its numerics against that cell go the long way.
	forced map[string]bool
}

// probeSteps are one comparable greedy answer's steps, by probe and request.
type probeSteps struct {
	key   string
	steps []pstep
}

// pstep is a logprob step: its token and its candidates, each token once
// (duplicates merged, as stepKL merges them) with its probability and
// whether it had a number (a NaN logprob has none).
type pstep struct {
	token string
	alts  []palt
}

type palt struct {
	token string
	p     float64
	// lnq is ln of the probability floored at kProbFloor, as term takes
	// it on the cell's side; plnp is p ln p, term's other half.
	lnq, plnp float64
	num       bool
}

// prepare works out a member's step probabilities once.
func prepare(obs []evidence.Observation) ([]probeSteps, map[string]bool) {
	var out []probeSteps
	var forced map[string]bool
	for _, o := range obs {
		if o.Forced != nil && o.Forced.Against != "" {
			if forced == nil {
				forced = map[string]bool{}
			}
			forced[o.Forced.Against] = true
		}
		if !comparable(o) {
			continue
		}
		ps := probeSteps{key: fmt.Sprintf("%s#%d", o.Probe, o.Request), steps: make([]pstep, len(o.Logprobs.Steps))}
		n := 0
		for _, st := range o.Logprobs.Steps {
			n += len(st.Top)
		}
		backing := make([]palt, 0, n) // one allocation for the answer's candidates
		for i, st := range o.Logprobs.Steps {
			ps.steps[i].token = st.Token
			ps.steps[i].alts = backing[len(backing):len(backing)]
			for j, a := range st.Top {
				if seenBefore(st.Top[:j], a.Token) {
					continue
				}
				p, num := probOf(st.Top, a.Token)
				pa := palt{token: a.Token, p: p, num: num, lnq: math.Log(max(p, kProbFloor))}
				switch {
				case p >= kProbFloor:
					pa.plnp = p * pa.lnq
				case p > 0:
					pa.plnp = p * math.Log(p)
				}
				ps.steps[i].alts = append(ps.steps[i].alts, pa)
			}
			backing = backing[:len(backing)+len(ps.steps[i].alts)]
		}
		out = append(out, ps)
	}
	return out, forced
}

// klPrepared is stepKL on prepared steps, p the reference's.
func klPrepared(p, q pstep) float64 {
	var kl, sp, sq float64
	for _, a := range p.alts {
		for _, b := range q.alts {
			if b.token == a.token {
				if b.num {
					sp += a.p
					sq += b.p
					if a.p > 0 {
						kl += a.plnp - a.p*b.lnq // term(a.p, b.p)
					}
				}
				break
			}
		}
	}
	kl += term(max(0, 1-sp), max(0, 1-sq))
	return max(0, kl)
}

// numericsPrepared is compareWithReference's divergence of m from the
// leader ref on prepared steps: the mean KL over every compared position
// of every request both answered, and how many positions were compared.
func numericsPrepared(ref, m member) (float64, int) {
	// At most most positions are compared; past DegradedKL times that,
	// the mean cannot come back under the floor, and the rest is not read.
	most := 0
	for _, ps := range m.steps {
		if i := slices.IndexFunc(ref.steps, func(r probeSteps) bool { return r.key == ps.key }); i >= 0 {
			most += min(len(ps.steps), len(ref.steps[i].steps))
		}
	}
	var total float64
	n := 0
	for _, ps := range m.steps {
		if total > DegradedKL*float64(most) {
			return total / float64(max(n, 1)), max(n, 1)
		}
		i := slices.IndexFunc(ref.steps, func(r probeSteps) bool { return r.key == ps.key })
		if i < 0 {
			continue
		}
		cell, rs := ps.steps, ref.steps[i].steps
		for j := 0; j < min(len(cell), len(rs)); j++ {
			if len(cell[j].alts) > 0 && len(rs[j].alts) > 0 {
				total += klPrepared(rs[j], cell[j])
				n++
			}
			if cell[j].token != rs[j].token {
				break
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return total / float64(n), n
}

// star is a leader and every answering cell that agrees with it.
type star struct {
	leader  member
	members []int // indexes into peers, the leader first
	// textAgrees caches the leader's text agreement by answer key, and
	// textCommon how many answers it compared.
	textAgrees map[string]bool
	textCommon map[string]int
}

// agreesWith says whether m agrees with the star's leader: the same greedy
// answers as wholes (WholeAgree) and, where both have top-k logprobs, a
// divergence within DegradedKL, the floor healthy backends stay under;
// with at least one answer or one logprob compared. Text alone would let a
// drifting cell (the right words, the wrong numerics) vouch for healthy
// ones and be vouched for by them.
func (s *star) agreesWith(peers []Peer, m member) bool {
	ok, seen := s.textAgrees[m.key]
	if !seen {
		ok, s.textCommon[m.key] = s.leader.answers.agrees(m.answers)
		s.textAgrees[m.key] = ok
	}
	if !ok {
		return false
	}
	leader := peers[s.leader.peer].Cell
	if m.forced[leader] {
		// Scored on the leader's own tokens: the long way, which reads it.
		ref := &Reference{Cell: leader, Observations: peers[s.leader.peer].In.Observations}
		n := compareWithReference(Input{Observations: peers[m.peer].In.Observations, Reference: ref})
		if n != nil && n.Compared > 0 {
			return n.KL <= DegradedKL
		}
		return s.textCommon[m.key] > 0
	}
	if kl, n := numericsPrepared(s.leader, m); n > 0 {
		return kl <= DegradedKL
	}
	return s.textCommon[m.key] > 0
}

// holds reports whether the star has the peer i among its members.
func (s *star) holds(i int) bool { return slices.Contains(s.members, i) }

// together reports two stars that are one group: either holds the other's
// leader.
func together(s, t *star) bool { return s.holds(t.leader.peer) || t.holds(s.leader.peer) }

// answering are the cells whose evidence alone is correct (shape only or
// not) and that have greedy answers or logprobs to compare, the reference
// first.
func answering(peers []Peer, refIdx int) []member {
	memo := observationMemo{}
	order := make([]int, 0, len(peers))
	if refIdx >= 0 {
		order = append(order, refIdx)
	}
	for i := range peers {
		if i != refIdx {
			order = append(order, i)
		}
	}
	var ms []member
	for _, i := range order {
		p := peers[i]
		if p.Follows != "" || p.Apart != "" {
			continue
		}
		if !answered(p, memo) {
			continue
		}
		if ans := greedyAnswers(p.In.Observations); len(ans) > 0 || hasSteps(p.In.Observations) {
			steps, forced := prepare(p.In.Observations)
			ms = append(ms, member{peer: i, answers: ans, key: ans.key(), steps: steps, forced: forced})
		}
	}
	return ms
}

// answered says whether the cell's evidence alone, without a reference,
// is correct. The cells of a sweep judged again here (those judged wrong or
// degraded against the reference) mostly answered their probes alike, so
// each alike observation is judged once, through memo.
func answered(p Peer, memo observationMemo) bool {
	switch p.Verdict {
	case Correct:
		return true
	case "", Wrong, Degraded:
		in := p.In
		in.Reference, in.Earlier = nil, nil
		return judgeCellWith(in, memo).Verdict == Correct
	}
	return false
}

// stars groups the answering cells around leaders: each cell joins every
// leader's star it agrees with, and leads a star of its own when it agrees
// with none (while there are fewer than maxLeaders).
func stars(peers []Peer, ms []member) []*star {
	var out []*star
	for _, m := range ms {
		joined := false
		for _, s := range out {
			if s.agreesWith(peers, m) {
				s.members = append(s.members, m.peer)
				joined = true
			}
		}
		if joined {
			continue
		}
		s := &star{leader: m, members: []int{m.peer}, textAgrees: map[string]bool{}, textCommon: map[string]int{}}
		if len(out) < maxLeaders {
			out = append(out, s)
			continue
		}
		// At the cap, a new cell takes the place of the oldest leader
		// nobody joined (never the reference's, the first): cells that
		// agree with no one early must not keep those that agree later
		// from forming a group.
		for i, o := range out[1:] {
			if len(o.members) == 1 {
				copy(out[i+1:], out[i+2:])
				out[len(out)-1] = s
				break
			}
		}
	}
	return out
}

// contender is a group weighed against the others: a star of two or more
// agreeing cells, or the passing reference's star of any size.
type contender struct {
	s         *star
	reference bool
	group     Group
}

// contenders are the stars that compete: the reference's (when it
// passes), then every star of two or more that is not one group with a
// contender before it; each with what its make-up shares and avoids.
func contenders(ss []*star, refStar *star, ms []member, peers []Peer) []contender {
	groupOf := func(s *star) Group { return makeUpOf(s.members, ms, ss, peers) }
	var out []contender
	add := func(s *star, ref bool) {
		for _, c := range out {
			if together(c.s, s) {
				return
			}
		}
		out = append(out, contender{s: s, reference: ref, group: groupOf(s)})
		out[len(out)-1].group.Reference = ref
	}
	if refStar != nil {
		add(refStar, true)
	}
	for _, s := range ss {
		if s != refStar && len(s.members) >= 2 {
			add(s, false)
		}
	}
	// Avoiding a value explains a group less well than sharing it explains
	// the group that does: a fault in one value (one kernel) is a simpler
	// story than the same fault in every other value, which the avoiding
	// group spans. So where another contender shares the value a group
	// avoids, that value explains only the sharer: three MoE runners that
	// agree with each other against a fourth that agrees with itself are
	// right, the fourth is broken. An avoided value that no group shares
	// (the reference's row and column, which share nothing) still explains.
	for i := range out {
		for k, v := range out[i].group.Avoids {
			for j := range out {
				if j != i && out[j].group.Shares[k] == v {
					delete(out[i].group.Avoids, k)
					break
				}
			}
		}
		if len(out[i].group.Avoids) == 0 {
			out[i].group.Avoids = nil
		}
	}
	return out
}

// makeUpOf describes a group: its members (the first maxGroupNamed, in
// peer order), and the axis values that explain its agreement. A value
// explains it when all its members share it (or all avoid it) and the
// answering cells on the other side of that value behave as healthy cells
// would if the value were the fault: they agree with one another (with
// several values on the other side, the cells of each value agree). Then
// "that value is the fault" accounts for the answers as well as "the group
// is right" does. Where the other side disagrees among itself (the cells
// of one quantised GEMM part by dtype), the value does not explain the
// group. A group of one shares and avoids nothing: its agreement is not
// in question, it has none.
func makeUpOf(members []int, ms []member, ss []*star, peers []Peer) Group {
	sorted := slices.Clone(members)
	sort.Ints(sorted)
	g := Group{Size: len(sorted)}
	for _, m := range sorted[:min(len(sorted), maxGroupNamed)] {
		g.Cells = append(g.Cells, peers[m].Cell)
	}
	if len(members) < 2 {
		return g
	}
	in := make(map[int]bool, len(members))
	for _, m := range members {
		in[m] = true
	}
	// outside[axis][value]: the answering cells outside the group that
	// have each value.
	outside := map[string]map[string][]int{}
	var axes []string
	for _, m := range ms {
		if in[m.peer] {
			continue
		}
		for k, v := range peers[m.peer].Values {
			if outside[k] == nil {
				outside[k] = map[string][]int{}
				axes = append(axes, k)
			}
			outside[k][v] = append(outside[k][v], m.peer)
		}
	}
	sort.Strings(axes)
	agree := agreeing(ss)
	for _, k := range axes {
		values := map[string]bool{}
		for _, m := range members {
			values[peers[m].Values[k]] = true
		}
		if len(values) == 1 {
			// Shares v: the cells without v, value by value, agree.
			for v := range values {
				others, consistent := 0, true
				for w, cells := range outside[k] {
					if w != v {
						others += len(cells)
						consistent = consistent && agree(cells)
					}
				}
				if others > 0 && consistent {
					if g.Shares == nil {
						g.Shares = map[string]string{}
					}
					g.Shares[k] = v
				}
			}
			continue
		}
		// Avoids v: the cells with v agree.
		for _, v := range slices.Sorted(maps.Keys(outside[k])) {
			if !values[v] && agree(outside[k][v]) {
				if g.Avoids == nil {
					g.Avoids = map[string]string{}
				}
				g.Avoids[k] = v
				break
			}
		}
	}
	return g
}

// agreeing returns a test of whether cells (peer indexes) agree as healthy
// cells would: more than half of them in one star. One stray cell (a tie
// taken without logprobs to show it, a fault of its own) does not undo
// what the rest agree on; cells that split into groups of their own do.
func agreeing(ss []*star) func(cells []int) bool {
	of := map[int][]int{} // peer -> the stars that hold it
	for i, s := range ss {
		for _, m := range s.members {
			of[m] = append(of[m], i)
		}
	}
	return func(cells []int) bool {
		if len(cells) < 2 {
			return true
		}
		count := make([]int, len(ss))
		for _, c := range cells {
			for _, i := range of[c] {
				count[i]++
				if 2*count[i] > len(cells) {
					return true
				}
			}
		}
		return false
	}
}

// Agreements finds which cells' greedy answers agree and chooses the
// yardstick the cells are judged against. Two different kernel paths
// rarely produce the same text and numerics by accident, so the members of
// a group vouch for each other, but agreement proves only what varied: a
// group all of whose members share a value the others lack, or all avoid
// a value some other cell has (the reference's, say), agrees as a fault
// in that value (or in everything but it) would make it agree.
//
// The rule, applied to every contender alike (the passing reference's
// group, of any size, and every group of two or more agreeing cells):
//   - one contender alone is the yardstick (confirmed, unconfirmed, or the
//     group that replaces a failed or missing reference), with a note of
//     what its make-up leaves unproven;
//   - otherwise only groups whose make-up does not explain their agreement
//     can win; the largest of them wins, unless another as large stands
//     apart from it;
//   - where none can win, or the largest tie, bmx cannot tell: it names
//     the groups and what each shares or avoids, judges no cell against
//     any of them, and says what would decide it.
func Agreements(peers []Peer, reference string) Agreement {
	a := Agreement{Reference: reference, Vouched: map[string][]string{}}
	refIdx := slices.IndexFunc(peers, func(p Peer) bool { return reference != "" && p.Cell == reference })
	ms := answering(peers, refIdx)
	if len(ms) == 0 {
		// No cell answered a greedy probe: verdicts rest on expectations
		// and the text's shape, and there is nothing to agree on.
		return Agreement{Reference: reference}
	}
	ss := stars(peers, ms)
	var refStar *star
	if refIdx >= 0 && ms[0].peer == refIdx {
		refStar = ss[0]
	}
	cs := contenders(ss, refStar, ms, peers)
	win, decided := choose(cs)
	switch {
	case len(cs) == 0:
		a.Status = NoYardstick
	case !decided:
		a.Status = Undecided
		a.undecided(cs, ms, peers)
	case cs[win].reference:
		a.Yardstick, a.Status = reference, RefConfirmed
		if len(cs[win].s.members) < 2 {
			a.Status = RefUnconfirmed
		}
	default:
		a.Status = RefBroken
		switch {
		case refStar != nil:
			a.Status = RefOutlier
		case reference == "":
			a.Status = NoReference
		}
		a.Yardstick = peers[cs[win].s.leader.peer].Cell
	}
	if decided && len(cs) > 0 {
		cs[0], cs[win] = cs[win], cs[0]
		if len(cs[0].s.members) >= 2 {
			a.group(peers, cs[0].s.members)
		}
	}
	for _, c := range cs {
		a.Groups = append(a.Groups, c.group)
	}
	a.Note = a.note(refIdx, cs)
	return a
}

// choose is the contender that wins and whether one does (see
// Agreements).
func choose(cs []contender) (int, bool) {
	switch len(cs) {
	case 0:
		return -1, false
	case 1:
		return 0, true
	}
	best, tie := -1, false
	for i, c := range cs {
		if c.group.Size < 2 || c.group.Explained() {
			continue
		}
		switch {
		case best < 0 || c.group.Size > cs[best].group.Size:
			best, tie = i, false
		case c.group.Size == cs[best].group.Size:
			tie = true
		}
	}
	return best, best >= 0 && !tie
}

// undecided records, for a contest bmx cannot decide, which group each
// answering cell of the contenders belongs to, and what would decide it.
func (a *Agreement) undecided(cs []contender, ms []member, peers []Peer) {
	a.Unconfirmed = map[string]int{}
	for i, c := range cs {
		for _, m := range c.s.members {
			if _, ok := a.Unconfirmed[peers[m].Cell]; !ok {
				a.Unconfirmed[peers[m].Cell] = i
			}
		}
	}
	// An answering cell in no group agrees with none of them.
	for _, m := range ms {
		if _, ok := a.Unconfirmed[peers[m.peer].Cell]; !ok {
			a.Unconfirmed[peers[m.peer].Cell] = -1
		}
	}
	// A twin carries its source's evidence, and its standing.
	for _, p := range peers {
		if g, ok := a.Unconfirmed[p.Follows]; ok && p.Follows != "" {
			a.Unconfirmed[p.Cell] = g
		}
	}
	a.Decide = "a probe with an expected answer (expect = ...), a cell that shares values with more than one group, or a baseline run (--baseline) whose verified answers can be the yardstick"
}

// group records the chosen group's members, their vouchers and the values
// they all share.
func (a *Agreement) group(peers []Peer, members []int) {
	members = slices.Clone(members)
	sort.Ints(members)
	for _, m := range members {
		a.Group = append(a.Group, peers[m].Cell)
	}
	for _, m := range members {
		var vs []string
		for _, o := range members {
			if len(vs) == maxVouchersNamed {
				break
			}
			if o != m {
				vs = append(vs, peers[o].Cell)
			}
		}
		a.Vouched[peers[m].Cell] = vs
	}
	// A twin carries its source's evidence: it is vouched for as its
	// source is, and vouches for nothing itself.
	for _, p := range peers {
		if vs, ok := a.Vouched[p.Follows]; ok && p.Follows != "" && len(vs) > 0 {
			a.Vouched[p.Cell] = vs
		}
	}
	a.Shared = sharedValues(members, peers)
}

// sharedValues are the axis values every member has.
func sharedValues(members []int, peers []Peer) map[string]string {
	shared := map[string]string{}
	for k, v := range peers[members[0]].Values {
		all := true
		for _, m := range members[1:] {
			all = all && peers[m].Values[k] == v
		}
		if all {
			shared[k] = v
		}
	}
	if len(shared) == 0 {
		return nil
	}
	return shared
}

// note is the sentence reports print about the yardstick.
func (a *Agreement) note(refIdx int, cs []contender) string {
	others := len(a.Group) - 1
	var s string
	switch a.Status {
	case RefConfirmed:
		s = fmt.Sprintf("the reference %s is vouched for by %d other %s whose greedy answers agree with it", a.Reference, others, cells(others))
	case RefUnconfirmed:
		s = fmt.Sprintf("no other cell's greedy answers agree with the reference %s, so nothing vouches for it", a.Reference)
	case RefOutlier:
		s = fmt.Sprintf("the reference %s is the outlier: %d cells agree with each other and not with it, and nothing they all share or avoid explains it, so cells are judged against %s", a.Reference, len(a.Group), a.Yardstick)
	case RefBroken:
		why := "was not run"
		if refIdx >= 0 {
			why = "failed"
		}
		s = fmt.Sprintf("the reference %s %s, so it is no yardstick: cells are judged against %s, whose greedy answers %d other %s share", a.Reference, why, a.Yardstick, others, cells(others))
	case NoReference:
		s = fmt.Sprintf("no reference is configured: cells are judged against %s, whose greedy answers %d other %s share", a.Yardstick, others, cells(others))
	case NoYardstick:
		s = "the cells' greedy answers do not agree in a group and the reference cannot decide: bmx cannot tell which is right, so greedy answers are judged by their shape only"
		if a.Reference == "" {
			s = "no two cells' greedy answers agree and no reference is configured: bmx cannot tell which is right, so greedy answers are judged by their shape only"
		}
		return s
	case Undecided:
		return a.undecidedNote()
	}
	var unproven []string
	if len(a.Shared) > 0 {
		unproven = append(unproven, "use "+strings.Join(sortedPairs(a.Shared), ", "))
	}
	if len(cs) > 0 && len(cs[0].group.Avoids) > 0 {
		unproven = append(unproven, "avoid "+strings.Join(sortedPairs(cs[0].group.Avoids), ", "))
	}
	if len(unproven) > 0 && len(a.Group) > 1 {
		s += fmt.Sprintf("; all agreeing cells %s: a fault there would not show", strings.Join(unproven, " and "))
	}
	if len(cs) > 1 {
		var lost []string
		for _, c := range cs[1:] {
			why := "smaller"
			switch {
			case c.reference && c.group.Size < 2:
				why = "the reference, alone"
			case c.group.Explained():
				why = c.group.makeUp() + ", which explains its agreement"
			}
			lost = append(lost, fmt.Sprintf("%d %s (%s)", c.group.Size, cells(c.group.Size), why))
		}
		s += "; outweighed: " + strings.Join(lost, "; ")
	}
	return s
}

// undecidedNote names the groups of an undecided contest and what each
// shares or avoids.
func (a *Agreement) undecidedNote() string {
	var gs []string
	for i, g := range a.Groups {
		name := fmt.Sprintf("group %d", i+1)
		if g.Reference {
			name += ", the reference's"
		}
		what := "nothing in its make-up explains its agreement"
		switch {
		case g.Size < 2:
			what = "nothing vouches for it"
		case g.Explained():
			what = g.makeUp()
		}
		first := strings.Join(g.Cells[:min(2, len(g.Cells))], ", ")
		if g.Size > 2 {
			first += ", …"
		}
		gs = append(gs, fmt.Sprintf("%s (%d %s: %s): %s", name, g.Size, cells(g.Size), first, what))
	}
	return fmt.Sprintf("bmx cannot tell which answers are right: %d groups of cells give different greedy answers and none can outweigh the others (%s); their cells are correct* (unconfirmed), none is condemned on agreement alone. What would decide it: %s",
		len(a.Groups), strings.Join(gs, "; "), a.Decide)
}

// sortedPairs are a map's entries as sorted "key=value" strings.
func sortedPairs(m map[string]string) []string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return kv
}

func cells(n int) string {
	if n == 1 {
		return "cell"
	}
	return "cells"
}

// VouchReason is appended to the reason of a correct cell that agreeing
// cells vouch for: how many, the first of them named.
func (a *Agreement) VouchReason(cell string) string {
	named, n := a.Vouched[cell], len(a.Group)-1
	if len(named) == 0 {
		return ""
	}
	s := fmt.Sprintf("; vouched for by %d %s whose greedy answers agree (%s", n, cells(n), strings.Join(named, ", "))
	if n > len(named) {
		s += fmt.Sprintf(", and %d more", n-len(named))
	}
	return s + ")"
}

// UnconfirmedReason leads the reason of a correct cell of an undecided
// contest: which group it answered with, and why that does not confirm it
// ("" for a cell outside the contest).
func (a *Agreement) UnconfirmedReason(cell string) string {
	i, ok := a.Unconfirmed[cell]
	if !ok || i >= len(a.Groups) {
		return ""
	}
	if i < 0 {
		return fmt.Sprintf("unconfirmed: its greedy answers agree with none of the %d groups, and bmx cannot tell which group is right", len(a.Groups))
	}
	g := a.Groups[i]
	why := "a group as large disagrees with it"
	switch {
	case g.Size < 2:
		why = "nothing vouches for it and a group of cells disagrees"
	case g.Explained():
		why = g.makeUp() + ", which explains their agreement"
	}
	return fmt.Sprintf("unconfirmed: answers with group %d of %d (%d %s; %s), and bmx cannot tell which group is right", i+1, len(a.Groups), g.Size, cells(g.Size), why)
}
