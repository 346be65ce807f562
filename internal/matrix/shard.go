package matrix

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Shard is one of Count parts of a sweep spread over hosts. Index is 0-based,
// so a Slurm array task is --shard $SLURM_ARRAY_TASK_ID/N. The zero Shard
// means the whole sweep.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads "i/n" (0 <= i < n); the error quotes s, for a flag's
// name to go before it.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, ierr := strconv.Atoi(strings.TrimSpace(is))
	n, nerr := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || ierr != nil || nerr != nil {
		return Shard{}, fmt.Errorf("%q: want i/n, e.g. 0/3 (0-based)", s)
	}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("%q: want 0 <= i < n (shards are numbered from 0)", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// IsZero reports whether s is no shard: the whole sweep.
func (s Shard) IsZero() bool { return s.Count == 0 }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Assignment says which shard runs each cell of a plan.
//
// Cells are dealt by their axis values, not by their position or ID, so the
// same cell lands in the same shard whatever the order of the axes (or of
// their values) in the file. Shards differ in size by one cell at most. A
// cell prefers shards in an order of its own (rendezvous hashing of its
// values); cells are placed one by one, in an order that also comes from
// their values, each in the shard it prefers most that is not yet full. A
// value added to an axis therefore moves only the cells that its new cells
// push out of a full shard, not every cell after it as round-robin would.
//
// The reference cell is not dealt: every other cell is judged against it,
// greedy answers and logprobs alike, and those must come from the same
// host, build and GPUs as the cell they judge. So it runs first in every
// shard that runs another cell (and in shard 0 when there is nothing else).
// It costs one more server start per shard, and needs no shared state
// between shards.
type Assignment struct {
	Count int `json:"count"`
	// Reference is the reference cell's ID ("" = none).
	Reference string `json:"reference,omitempty"`
	// Of maps every other cell's ID to its shard.
	Of map[string]int `json:"of"`
}

// Assign deals the plan's cells over n shards.
func (p *Plan) Assign(n int) Assignment {
	return Assign(p.Cells, p.Reference, n)
}

// Assign deals cells over n shards (n >= 1); the cell whose ID is reference
// runs in every shard instead (see Assignment).
func Assign(cells []Cell, reference string, n int) Assignment {
	a := Assignment{Count: n, Reference: reference, Of: map[string]int{}}
	type dealt struct {
		id, key string
		order   uint64
	}
	var todo []dealt
	for _, c := range cells {
		if c.ID == reference && reference != "" {
			continue
		}
		k := cellKey(c)
		todo = append(todo, dealt{id: c.ID, key: k, order: hash64(k)})
	}
	slices.SortFunc(todo, func(x, y dealt) int {
		if x.order != y.order {
			if x.order < y.order {
				return -1
			}
			return 1
		}
		return strings.Compare(x.key, y.key)
	})
	load := make([]int, n)
	capacity := func(s int) int {
		c := len(todo) / n
		if s < len(todo)%n {
			c++
		}
		return c
	}
	for _, d := range todo {
		best, bestScore := -1, uint64(0)
		for s := range n {
			if load[s] >= capacity(s) {
				continue
			}
			if sc := hash64(d.key + "\x00" + strconv.Itoa(s)); best < 0 || sc > bestScore {
				best, bestScore = s, sc
			}
		}
		a.Of[d.id] = best
		load[best]++
	}
	return a
}

// RunsReference reports whether shard i runs the reference cell.
func (a Assignment) RunsReference(i int) bool {
	if a.Reference == "" {
		return false
	}
	if i == 0 {
		return true
	}
	for _, s := range a.Of {
		if s == i {
			return true
		}
	}
	return false
}

// Cells are shard i's cells, in the order of cells (the plan's: the
// reference first where it runs).
func (a Assignment) Cells(cells []Cell, i int) []Cell {
	var out []Cell
	for _, c := range cells {
		s, ok := a.Of[c.ID]
		switch {
		case c.ID == a.Reference && a.Reference != "":
			if a.RunsReference(i) {
				out = append(out, c)
			}
		case ok && s == i:
			out = append(out, c)
		}
	}
	return out
}

// Sizes counts each shard's cells, the reference included where it runs.
func (a Assignment) Sizes() []int {
	sizes := make([]int, a.Count)
	for _, s := range a.Of {
		sizes[s]++
	}
	for i := range sizes {
		if a.RunsReference(i) {
			sizes[i]++
		}
	}
	return sizes
}

// KeepShard keeps the cells shard sh runs, as Filter keeps those --only
// names, and returns how the whole plan was dealt.
func (p *Plan) KeepShard(sh Shard) Assignment {
	a := p.Assign(sh.Count)
	p.Cells = a.Cells(p.Cells, sh.Index)
	return a
}

// cellKey names a cell by its values whatever the order of the axes: the
// axis=value pairs sorted.
func cellKey(c Cell) string {
	pairs := make([]string, len(c.Values))
	for i, av := range c.Values {
		pairs[i] = av.Axis + "=" + av.Value
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "\x1f")
}

func hash64(s string) uint64 {
	sum := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(sum[:8])
}
