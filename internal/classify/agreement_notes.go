package classify

import (
	"fmt"
	"sort"
	"strings"
)

// note is the sentence reports print about the yardstick.
func (a *Agreement) note(why string, cs []contender) string {
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

// refWhy says why the reference is not among the answering cells: it was
// not run, it does not vote (a dedupe twin, a cell apart), or it failed.
func refWhy(peers []Peer, refIdx int) string {
	switch {
	case refIdx < 0:
		return "was not run"
	case peers[refIdx].Follows != "":
		return "shares the server of " + peers[refIdx].Follows + " (a dedupe twin), which does not vote"
	case peers[refIdx].Apart != "":
		return "is not comparable with the other cells (" + peers[refIdx].Apart + ")"
	}
	return "failed"
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
