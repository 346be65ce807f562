package classify

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/bmx-dev/bmx/internal/evidence"
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
	memo := newMemo()
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
	a.Note = a.note(refWhy(peers, refIdx), cs)
	return a
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
