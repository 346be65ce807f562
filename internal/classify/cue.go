package classify

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"
)

// cue is a set of words and phrases asked of a prompt, case-insensitively
// ("does the prompt ask for a translation?"). It is written as a regular
// expression, (?i) with literal alternatives, optional parts, small
// character classes and \b at a phrase's ends, and matches exactly what
// that expression matches; but it reads the text once, looking up each
// rune's phrases by their first letter, where the expression, dozens of
// alternatives with no literal prefix to look for, stepped every
// alternative at every position (half the classifier's time in issue 25).
type cue struct {
	expr string
	// first is built on the first use, as a lazyRegexp is compiled.
	once  sync.Once
	first map[rune][]cuePhrase // by the folded first rune
}

// everyCue lists the classifier's cues, so a test can build each.
var everyCue []*cue

// cuePhrase is one literal of a cue: its runes case folded (foldKey), and
// whether \b must hold before and after it.
type cuePhrase struct {
	runes      []rune
	start, end bool
}

// wordBoundary stands for \b while a cue's phrases are spelled out.
const wordBoundary = '\uE000'

// newCue makes the cue of a constant expression, built on its first use;
// that panics when the expression is more than a cue can say.
func newCue(expr string) *cue {
	c := &cue{expr: expr}
	everyCue = append(everyCue, c)
	return c
}

// build spells out the cue's phrases.
func (c *cue) build() {
	re, err := syntax.Parse(c.expr, syntax.Perl)
	if err != nil {
		panic(err)
	}
	expr := c.expr
	c.first = map[rune][]cuePhrase{}
	seen := map[string]bool{}
	for _, p := range cuePhrases(re.Simplify()) {
		r := []rune(p)
		ph := cuePhrase{}
		if len(r) > 0 && r[0] == wordBoundary {
			ph.start, r = true, r[1:]
		}
		if len(r) > 0 && r[len(r)-1] == wordBoundary {
			ph.end, r = true, r[:len(r)-1]
		}
		if len(r) == 0 || slices.Contains(r, wordBoundary) {
			panic(fmt.Sprintf("cue %q: a phrase %q that is empty or has \\b inside", expr, p))
		}
		for i := range r {
			r[i] = foldKey(r[i])
		}
		key := fmt.Sprint(ph.start, ph.end, string(r))
		if seen[key] {
			continue
		}
		seen[key] = true
		ph.runes = r
		c.first[r[0]] = append(c.first[r[0]], ph)
	}
}

// cuePhrases spells out every literal re matches, \b as wordBoundary.
func cuePhrases(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 {
			panic(fmt.Sprintf("cue %s: not case-insensitive", re))
		}
		return []string{string(re.Rune)}
	case syntax.OpCharClass:
		var out []string
		for i := 0; i < len(re.Rune); i += 2 {
			if re.Rune[i+1]-re.Rune[i] > 16 {
				panic(fmt.Sprintf("cue %s: a character class too large to spell out", re))
			}
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				out = append(out, string(r))
			}
		}
		return out
	case syntax.OpWordBoundary:
		return []string{string(wordBoundary)}
	case syntax.OpEmptyMatch:
		return []string{""}
	case syntax.OpCapture:
		return cuePhrases(re.Sub[0])
	case syntax.OpQuest:
		return append([]string{""}, cuePhrases(re.Sub[0])...)
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			out = append(out, cuePhrases(s)...)
		}
		return out
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range re.Sub {
			var next []string
			for _, tail := range cuePhrases(s) {
				for _, head := range out {
					next = append(next, head+tail)
				}
			}
			out = next
		}
		return out
	}
	panic(fmt.Sprintf("cue %s: %v is more than a cue can say", re, re.Op))
}

// MatchString reports whether s holds one of the cue's phrases.
func (c *cue) MatchString(s string) bool {
	c.once.Do(c.build)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		for _, p := range c.first[foldKey(r)] {
			if p.at(s, i) {
				return true
			}
		}
		i += n
	}
	return false
}

// at reports the phrase at s[i:], with its word boundaries.
func (p cuePhrase) at(s string, i int) bool {
	if p.start && !isWordBoundary(s, i) {
		return false
	}
	j := i
	for _, want := range p.runes {
		if j >= len(s) {
			return false
		}
		r, n := utf8.DecodeRuneInString(s[j:])
		if foldKey(r) != want {
			return false
		}
		j += n
	}
	return !p.end || isWordBoundary(s, j)
}

// isWordBoundary is \b at s[i]: an ASCII word character ([0-9A-Za-z_])
// on one side and not on the other, as Go's regexp has it.
func isWordBoundary(s string, i int) bool {
	before := i > 0 && syntax.IsWordChar(rune(s[i-1]))
	after := i < len(s) && syntax.IsWordChar(rune(s[i]))
	return before != after
}

// foldKey is the one rune that stands for r's case-folding orbit (the
// smallest), so two runes match under (?i) when their keys are equal.
func foldKey(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// String is the cue's expression.
func (c *cue) String() string { return c.expr }
