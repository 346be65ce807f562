package classify

import (
	"fmt"
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
}

// AgreementStatus says how the yardstick of a sweep was chosen.
type AgreementStatus string

// Agreement statuses.
const (
	// RefConfirmed: the reference's greedy answers are shared by other
	// cells, so the cells vouch for it and it stays the yardstick.
	RefConfirmed AgreementStatus = "confirmed"
	// RefUnconfirmed: the reference passes but no other cell shares its
	// greedy answers, and no larger group disagrees with it.
	RefUnconfirmed AgreementStatus = "unconfirmed"
	// RefOutlier: the reference passes but a larger group of cells agree
	// with each other and not with it; the group is the yardstick.
	RefOutlier AgreementStatus = "outlier"
	// RefBroken: the reference failed (or did not run); the largest group
	// of agreeing cells is the yardstick.
	RefBroken AgreementStatus = "broken"
	// NoReference: none is configured; the largest group of agreeing
	// cells is the yardstick.
	NoReference AgreementStatus = "no-reference"
	// NoYardstick: the answering cells split into groups of one (or tie)
	// and the reference cannot be the yardstick: bmx cannot tell which
	// answers are right, and judges greedy answers by their shape only.
	NoYardstick AgreementStatus = "split"
)

// Agreement is what the cells' greedy answers say about one another. A
// zero Status means no cell answered a greedy probe: nothing to agree on.
type Agreement struct {
	// Reference is the configured reference cell ("" for none).
	Reference string `json:"reference,omitempty"`
	// Yardstick is the cell the others are judged against ("" for none).
	Yardstick string          `json:"yardstick,omitempty"`
	Status    AgreementStatus `json:"status"`
	// Group is the largest group of cells whose greedy answers agree, the
	// yardstick's group (empty when no two cells agree).
	Group []string `json:"group,omitempty"`
	// Shared are the axis values every member of Group has: agreement
	// proves only what varied, so a fault in one of these would not show.
	Shared map[string]string `json:"shared,omitempty"`
	// Note says it in a sentence for reports.
	Note string `json:"note"`
	// Vouched maps a member of Group to the first maxVouchersNamed other
	// members (its vouchers; it has len(Group)-1 in all).
	Vouched map[string][]string `json:"-"`
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
)

// answers is one cell's greedy answers by probe and request.
type answers map[string]string

// greedyAnswers are the answers of a cell's greedy probes without an
// expectation: what two healthy kernel paths should both produce. (Probes
// with an expectation are compared by their numerics only: every
// answering cell met their expectations.)
func greedyAnswers(obs []evidence.Observation) answers {
	a := answers{}
	for _, o := range obs {
		if greedy(o) && o.Expect == nil {
			ans, _ := SplitThinking(o.Text)
			a[fmt.Sprintf("%s#%d", o.Probe, o.Request)] = strings.TrimSpace(ans)
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

// key is a canonical form of the answers, equal for equal answer sets.
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
		b.WriteString(a[k])
		b.WriteByte(0)
	}
	return b.String()
}

// agrees says whether every greedy answer both cells gave agrees (Agree),
// and how many they gave in common.
func (a answers) agrees(b answers) (bool, int) {
	common := 0
	for k, x := range a {
		y, ok := b[k]
		if !ok {
			continue
		}
		common++
		if ok, _ := Agree(x, y); !ok {
			return false, common
		}
	}
	return true, common
}

// member is an answering cell: its index among the peers, its greedy
// answers and their canonical key.
type member struct {
	peer    int
	answers answers
	key     string
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
// answers (Agree) and, where both have top-k logprobs, a divergence within
// DegradedKL, the floor healthy backends stay under; with at least one
// answer or one logprob compared. Text alone would let a drifting cell
// (the right words, the wrong numerics) vouch for healthy ones and be
// vouched for by them.
func (s *star) agreesWith(peers []Peer, m member) bool {
	ok, seen := s.textAgrees[m.key]
	if !seen {
		ok, s.textCommon[m.key] = s.leader.answers.agrees(m.answers)
		s.textAgrees[m.key] = ok
	}
	if !ok {
		return false
	}
	ref := &Reference{Cell: peers[s.leader.peer].Cell, Observations: peers[s.leader.peer].In.Observations}
	n := compareWithReference(Input{Observations: peers[m.peer].In.Observations, Reference: ref})
	if n != nil && n.Compared > 0 {
		return n.KL <= DegradedKL
	}
	return s.textCommon[m.key] > 0
}

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
		if p.Follows != "" {
			continue
		}
		if !answered(p, memo) {
			continue
		}
		if ans := greedyAnswers(p.In.Observations); len(ans) > 0 || hasSteps(p.In.Observations) {
			ms = append(ms, member{peer: i, answers: ans, key: ans.key()})
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
		if !joined && len(out) < maxLeaders {
			out = append(out, &star{leader: m, members: []int{m.peer}, textAgrees: map[string]bool{}, textCommon: map[string]int{}})
		}
	}
	return out
}

// Agreements finds which cells' greedy answers agree and chooses the
// yardstick the cells are judged against. Two different kernel paths
// rarely produce the same text and numerics by accident, so the members of
// the chosen group vouch for each other. The configured reference stays
// the yardstick while it passes and no larger group disagrees with it (a
// group whose members all share a value the reference lacks does not
// count: that value may be what they agree on); otherwise the largest
// group's leader is, and with no group of two or more (or a tie) there is
// none.
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
	best, tie := largestStar(ss, refStar, peers)
	var chosen *star
	switch {
	case refStar != nil && (best == nil || best == refStar || len(best.members) < 2):
		a.Yardstick, a.Status, chosen = reference, RefConfirmed, refStar
		if len(refStar.members) < 2 {
			a.Status, chosen = RefUnconfirmed, nil
		}
	case best != nil && !tie && len(best.members) >= 2:
		a.Status = RefBroken
		switch {
		case refStar != nil:
			a.Status = RefOutlier
		case reference == "":
			a.Status = NoReference
		}
		a.Yardstick, chosen = peers[best.leader.peer].Cell, best
	default:
		a.Status = NoYardstick
	}
	if chosen != nil {
		a.group(peers, chosen.members)
	}
	a.Note = a.note(refIdx)
	return a
}

// largestStar is the star with the most members, and whether another as
// large stands apart from it (neither holds the other's leader). Against a
// reference that passes, a star counts only when it is larger than the
// reference's and its members do not all share a value the reference
// lacks; a tie with the reference's star goes to the reference.
func largestStar(ss []*star, refStar *star, peers []Peer) (*star, bool) {
	var best *star
	tie := false
	for _, s := range ss {
		if refStar != nil && s != refStar && (len(s.members) <= len(refStar.members) || sharedApart(s.members, refStar.leader.peer, peers)) {
			continue
		}
		switch {
		case best == nil || len(s.members) > len(best.members):
			best, tie = s, false
		case len(s.members) == len(best.members) && !slices.Contains(s.members, best.leader.peer):
			tie = true
		}
	}
	return best, tie
}

// sharedApart says whether every member has a value on some axis that the
// cell ref has not.
func sharedApart(members []int, ref int, peers []Peer) bool {
	for k, v := range sharedValues(members, peers) {
		if peers[ref].Values[k] != v {
			return true
		}
	}
	return false
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
	return shared
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
	if len(members) < 2 {
		return
	}
	a.Shared = sharedValues(members, peers)
}

// note is the sentence reports print about the yardstick.
func (a *Agreement) note(refIdx int) string {
	others := len(a.Group) - 1
	var s string
	switch a.Status {
	case RefConfirmed:
		s = fmt.Sprintf("the reference %s is vouched for by %d other %s whose greedy answers agree with it", a.Reference, others, cells(others))
	case RefUnconfirmed:
		s = fmt.Sprintf("no other cell's greedy answers agree with the reference %s, so nothing vouches for it", a.Reference)
	case RefOutlier:
		s = fmt.Sprintf("the reference %s is the outlier: %d cells agree with each other and not with it, so cells are judged against %s", a.Reference, len(a.Group), a.Yardstick)
	case RefBroken:
		why := "was not run"
		if refIdx >= 0 {
			why = "failed"
		}
		s = fmt.Sprintf("the reference %s %s, so it is no yardstick: cells are judged against %s, whose greedy answers %d other %s share", a.Reference, why, a.Yardstick, others, cells(others))
	case NoReference:
		s = fmt.Sprintf("no reference is configured: cells are judged against %s, whose greedy answers %d other %s share", a.Yardstick, others, cells(others))
	case NoYardstick:
		s = "the cells' greedy answers do not agree in a largest group and the reference cannot decide: bmx cannot tell which is right, so greedy answers are judged by their shape only"
		if a.Reference == "" {
			s = "no two cells' greedy answers agree in a largest group and no reference is configured: bmx cannot tell which is right, so greedy answers are judged by their shape only"
		}
	}
	if len(a.Shared) > 0 {
		var kv []string
		for k, v := range a.Shared {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		s += fmt.Sprintf("; all agreeing cells use %s: a fault there would not show", strings.Join(kv, ", "))
	}
	return s
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
