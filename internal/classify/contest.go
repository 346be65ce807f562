package classify

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

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
