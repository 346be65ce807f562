package classify

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// cues are every cue of the classifier, by name.
var cues = map[string]*cue{
	"templateCue": templateCue, "codeCue": codeCue, "punctuationCue": punctuationCue, "wordCue": wordCue,
	"structureCue": structureCue, "repetitionCues": repetitionCues, "languageCueRe": languageCueRe,
}

// cueTexts are texts to ask the cues and saidTwiceIn: every prompt, text
// and reasoning of the corpora, each cue's phrases in many cases and
// surroundings (word characters, marks, non-ASCII letters, the Kelvin sign
// and the long s that fold to ASCII letters), and random splices of them.
func cueTexts(t *testing.T) []string {
	var texts []string
	for _, p := range corpora {
		for _, c := range loadCases(t, p) {
			for _, o := range c.Input().Observations {
				texts = append(texts, o.Prompt, o.Text, o.Reasoning)
			}
		}
	}
	var phrases []string
	for _, c := range cues {
		for _, ps := range c.first {
			for _, p := range ps {
				phrases = append(phrases, string(p.runes))
			}
		}
	}
	for _, p := range phrases {
		for _, v := range []string{p, strings.ToLower(p), strings.ToUpper(p), strings.ReplaceAll(strings.ToLower(p), "k", "\u212a"), strings.ReplaceAll(strings.ToLower(p), "s", "ſ"), p[:len(p)-1]} {
			for _, around := range [][2]string{{"", ""}, {" ", " "}, {"x", ""}, {"", "x"}, {"_", "_"}, {"é", "é"}, {"1", "."}, {"a ", "s"}, {"(", ")"}, {"\xff", "\xff"}} {
				texts = append(texts, around[0]+v+around[1])
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 25))
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			p := phrases[rng.IntN(len(phrases))]
			if rng.IntN(3) == 0 {
				p = strings.ToLower(p)
			}
			b.WriteString([]string{"", " ", "-", "x", "s ", "é"}[rng.IntN(6)])
			b.WriteString(p)
		}
		texts = append(texts, b.String())
	}
	return texts
}

// TestCuesAreTheirExpressions asks every cue and its regular expression
// the same texts: a cue matches exactly what its expression matches.
func TestCuesAreTheirExpressions(t *testing.T) {
	texts := cueTexts(t)
	for name, c := range cues {
		re := regexp.MustCompile(c.String())
		matched := 0
		for _, s := range texts {
			want := re.MatchString(s)
			if got := c.MatchString(s); got != want {
				t.Errorf("%s.MatchString(%q) = %v, its expression says %v", name, s, got, want)
			}
			if want {
				matched++
			}
		}
		if matched == 0 || matched == len(texts) {
			t.Errorf("%s matched %d of %d texts: the comparison shows nothing", name, matched, len(texts))
		}
	}
}

// TestSaidTwiceIn compares saidTwiceIn, which reads words, with the
// expression it stands for, on the corpus and texts made to match.
func TestSaidTwiceIn(t *testing.T) {
	// The corpus's texts, not the cues' thousands of splices.
	var texts []string
	for _, p := range corpora {
		for _, c := range loadCases(t, p) {
			for _, o := range c.Input().Observations {
				texts = append(texts, o.Prompt, o.Text)
			}
		}
	}
	words := []string{"row", "Row", "the", "ok", "1", "é", "don't", "e.g", "go-to", "straße", "k", "s", "中"}
	for _, s := range texts[:min(len(texts), 400)] {
		for _, w := range strings.Fields(s) {
			if utf8.ValidString(w) && len(words) < 40 {
				words = append(words, strings.Trim(w, ".,;:!?\"'()"))
			}
		}
	}
	// Each word once: the corpus's first texts repeat some (four are
	// empty after the trim), and a word the matcher hands to the
	// expression compiles it for every text.
	slices.Sort(words)
	words = slices.Compact(words)
	texts = append(texts, "Row, row, row your boat", "ROW row", "row\u00a0row", "rows row", "row rowing row", "the\nthe", "k \u212a", "ſ S", "don't don't", "go-to, go-to.", "中 中", "中中", "1 1", "11 1")
	for _, w := range words {
		re := saidTwiceRe(w)
		for _, s := range texts {
			if got, want := saidTwiceIn(s, w), re.MatchString(s); got != want {
				t.Errorf("saidTwiceIn(%q, %q) = %v, the expression says %v", s, w, got, want)
			}
		}
	}
}

// TestNegatedBefore asks negatedBefore and negationRe the same texts: every
// prefix of the corpus's answers and prompts, and negations made to sit
// at the margin of what negatedBefore reads.
func TestNegatedBefore(t *testing.T) {
	var texts []string
	for _, p := range corpora {
		for _, c := range loadCases(t, p) {
			for _, o := range c.Input().Observations {
				for _, s := range []string{o.Text, o.Prompt} {
					if len(s) > 3000 {
						s = s[len(s)-3000:]
					}
					texts = append(texts, s)
				}
			}
		}
	}
	for _, neg := range []string{"not", "n't", "never", "cannot", "instead of", "rather than", "won't say", "refuse to say", "REFUSE TO ſAY", "Instead Of"} {
		for _, tail := range []string{"", " ", " it", " say it", "  say   it  ", " say it \"", " say it “", " say, it", " 3", "\t\nx\ny\n'"} {
			for _, head := range []string{"", "x", "I ", "é", "wait—", "you"} {
				texts = append(texts, head+neg+tail, strings.Repeat("a b ", 10)+head+neg+tail)
			}
		}
	}
	n := 0
	for _, s := range texts {
		for i := range len(s) + 1 {
			if got, want := negatedBefore(s[:i]), negationRe.MatchString(s[:i]); got != want {
				t.Fatalf("negatedBefore(%q) = %v, negationRe says %v", s[:i], got, want)
			}
			n++
		}
	}
	t.Logf("%d prefixes", n)
}

// TestEveryExpressionCompiles compiles each of the classifier's regexps and
// builds each cue: they are made on first use, so a bad one would otherwise
// panic only when some text first needed it.
func TestEveryExpressionCompiles(t *testing.T) {
	if len(everyRegexp) < 50 || len(everyCue) < 5 {
		t.Fatalf("%d regexps and %d cues registered: the package's variables are not all made with lazyRE and newCue", len(everyRegexp), len(everyCue))
	}
	for _, l := range everyRegexp {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("regexp %q: %v", l.expr, p)
				}
			}()
			l.get()
		}()
	}
	for _, c := range everyCue {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("cue %q: %v", c.expr, p)
				}
			}()
			c.MatchString("x")
		}()
	}
}
