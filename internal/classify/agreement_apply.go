package classify

import (
	"fmt"
	"slices"
	"strings"
)

// Cells are the judged cells of a run as ApplyAgreement judges them
// again, each by its index among the peers. A run's record adapts its
// results to it: judging a cell is the record's (it knows what else a
// verdict changes there), deciding who is judged against what is here.
type Cells interface {
	// Judge judges cell i again against ref (nil: none), as it was judged
	// when it ran, and returns its verdict now; the cell stays recorded as
	// judged by whichever classifier judged it.
	Judge(i int, ref *Reference) Verdict
	// Try is the verdict cell i's evidence gets against ref; the cell is
	// left as it is.
	Try(i int, ref *Reference) Verdict
	// Judged is cell i's verdict, reason and whether it rests on the
	// text's shape only; Set changes them.
	Judged(i int) (v Verdict, reason string, shapeOnly bool)
	Set(i int, v Verdict, reason string, shapeOnly bool)
	// SetAlone records the verdict cell i's evidence gets without any
	// yardstick, where a baseline's yardstick gave it another ("": none).
	SetAlone(i int, v Verdict)
	// SetVouched records the cells that vouch for cell i (nil: none).
	SetVouched(i int, by []string)
}

// Baseline is an earlier run's verified yardstick, offered to judge a
// run's cells where their own agreement leaves them none.
type Baseline struct {
	// Reference is its answers; its Cell is how verdicts name it
	// ("baseline RUN:cell").
	Reference *Reference
	// Unfit says why it cannot judge these cells ("" when it can); it is
	// asked only when the cells need it.
	Unfit func() string
	// Judges says what it is, for the agreement's note: "the yardstick of
	// the baseline run RUN: its cell C, how that run chose it; ...".
	Judges string
}

// VerdictChange is a cell whose verdict the agreement among cells changed:
// as judged when it ran and as judged against the yardstick the cells
// chose, or with none.
type VerdictChange struct {
	Cell string  `json:"cell"`
	From Verdict `json:"from"`
	To   Verdict `json:"to"`
}

// ApplyAgreement applies the agreement among cells (Agreements) to the
// judged cells peers describe (their Verdict as recorded, which applying
// it again starts from): when the configured reference is no yardstick
// (it failed, or is the outlier of a larger agreeing group) every cell is
// judged again against the one the cells chose, or, when they chose none,
// against the baseline's yardstick (when it fits) or with none. In a
// contest bmx cannot decide, a cell that agrees with no group and fails
// against each is inconclusive (judgeAgainstGroups). A correct cell that
// agreeing cells vouch for names them, and is no longer judged by shape
// only; one of an undecided contest says it is unconfirmed. It returns the
// agreement (nil: no cell answered a greedy probe, nothing to agree on)
// and the cells whose verdict it changed.
func ApplyAgreement(peers []Peer, reference string, base *Baseline, cells Cells) (*Agreement, []VerdictChange) {
	a := Agreements(peers, reference)
	if a.Status == "" {
		return nil, nil
	}
	if base != nil && (!a.NeedsBaseline() || base.Unfit() != "") {
		base = nil
	}
	var ref *Reference
	switch {
	case base != nil:
		// The cells chose no yardstick: the baseline's judges them, and
		// none stays unconfirmed.
		ref = base.Reference
		a.Note = a.NoYardstick(peerOf(peers, reference) >= 0) + ", so cells are judged against " + base.Judges
		a.Yardstick, a.Baseline, a.Unconfirmed = ref.Cell, ref.Cell, nil
	case a.Yardstick != reference:
		if i := peerOf(peers, a.Yardstick); i >= 0 {
			ref = peerReference(peers[i])
		}
	}
	if base != nil || a.Yardstick != reference {
		judgeAll(peers, cells, ref, base != nil)
	}
	if base == nil && a.Status == Undecided {
		judgeAgainstGroups(peers, reference, cells, &a)
	}
	var changed []VerdictChange
	for i, p := range peers {
		cells.SetVouched(i, a.Vouched[p.Cell])
		v, reason, shapeOnly := cells.Judged(i)
		switch {
		case v == Correct && shapeOnly && len(a.Vouched[p.Cell]) > 0:
			// Vouched for: no longer judged by shape only, and its reason
			// no longer says it was.
			if cut := strings.Index(reason, ShapeOnlyClause); cut >= 0 {
				reason = reason[:cut]
			}
			cells.Set(i, v, reason+a.VouchReason(p.Cell), false)
		case v == Correct && shapeOnly && a.UnconfirmedReason(p.Cell) != "":
			// What a report shows first: bmx could not tell.
			cells.Set(i, v, a.UnconfirmedReason(p.Cell)+"; "+reason, shapeOnly)
		}
		if p.Verdict != v {
			changed = append(changed, VerdictChange{Cell: p.Cell, From: p.Verdict, To: v})
		}
	}
	return &a, changed
}

// judgeAll judges every cell again against ref (nil: none). With alone,
// ref is another run's yardstick: each cell also records the verdict its
// evidence gets without it, where that differs.
func judgeAll(peers []Peer, cells Cells, ref *Reference, alone bool) {
	for i := range peers {
		cells.SetAlone(i, "")
		if !alone {
			cells.Judge(i, ref)
			continue
		}
		if v := cells.Judge(i, nil); cells.Judge(i, ref) != v {
			cells.SetAlone(i, v)
		}
	}
}

// judgeAgainstGroups judges, in a contest bmx cannot decide, each
// answering cell that agrees with none of the groups against every group's
// answers (its first cell's). Where it fails against each, it is wrong if
// any group is right, and right only if every group is wrong (two faults
// that each make their cells agree, and this cell the one healthy path):
// bmx can pass it no more than condemn it, so it is inconclusive, its
// reason naming the mildest of those failures, rather than correct*
// (unconfirmed). A cell that some group's answers pass stays unconfirmed.
func judgeAgainstGroups(peers []Peer, reference string, cells Cells, a *Agreement) {
	var refs []*Reference
	for _, g := range a.Groups {
		cell := ""
		switch {
		case g.Reference:
			cell = reference
		case len(g.Cells) > 0:
			cell = g.Cells[0] // its leader: the others agree with it
		}
		var ref *Reference
		if i := peerOf(peers, cell); i >= 0 {
			ref = peerReference(peers[i])
		}
		refs = append(refs, ref)
	}
	for i, p := range peers {
		if g, ok := a.Unconfirmed[p.Cell]; !ok || g >= 0 || len(refs) == 0 {
			continue
		}
		if v, _, _ := cells.Judged(i); v != Correct {
			continue
		}
		group := -1
		var mildest Verdict
		for gi, ref := range refs {
			if ref == nil {
				group = -1
				break
			}
			v := cells.Try(i, ref)
			if v == Correct {
				group = -1
				break
			}
			if group < 0 || v.Severity() < mildest.Severity() {
				mildest, group = v, gi
			}
		}
		if group < 0 {
			continue
		}
		v := cells.Judge(i, refs[group])
		_, reason, shapeOnly := cells.Judged(i)
		which := ""
		if a.Groups[group].Reference {
			which = ", the reference's"
		}
		reason = fmt.Sprintf("its answers fail against each of the %d groups bmx cannot choose between (wrong if any group is right, right only if all are wrong): %s against group %d%s: ", len(refs), v, group+1, which) + reason
		cells.Set(i, Inconclusive, reason, shapeOnly)
	}
}

// peerOf is the index of the peer of the cell id, -1 when none is.
func peerOf(peers []Peer, id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(peers, func(p Peer) bool { return p.Cell == id })
}

// peerReference is a peer's answers as the yardstick others are judged
// against.
func peerReference(p Peer) *Reference {
	return &Reference{Cell: p.Cell, Observations: p.In.Observations}
}

// NeedsBaseline reports an agreement that leaves the cells no yardstick:
// no group and no reference to judge by, or groups bmx cannot choose
// between. A group of today's cells that replaced a failed reference
// outranks a baseline: it answered on today's software.
func (a *Agreement) NeedsBaseline() bool {
	return a.Status == NoYardstick || a.Status == Undecided
}

// NoYardstick says why an agreement that chose no yardstick chose none;
// refRan says whether the configured reference ran.
func (a *Agreement) NoYardstick(refRan bool) string {
	switch {
	case a.Status == Undecided:
		return fmt.Sprintf("the cells' greedy answers fall into %d groups and bmx cannot tell which is right", len(a.Groups))
	case a.Reference == "":
		return "no reference is configured and no two cells' greedy answers agree"
	}
	how := "was not run"
	if refRan {
		how = "failed"
	}
	return fmt.Sprintf("the reference %s %s and no group of agreeing cells replaced it", a.Reference, how)
}
