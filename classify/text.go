package classify

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/bmx-dev/bmx/evidence"
)

// Garbled reports whether text is not language, and how it fails. The
// detectors look at shape only, never at a vocabulary, so they work in any
// language: replacement characters, runs of one punctuation mark, output
// with no letters or digits, words that switch script mid-word, loops of a
// word, phrase or sentence, and text that is mostly malformed tokens.
func Garbled(text string) (bool, string) {
	t := strings.TrimSpace(text)
	if t == "" {
		return false, ""
	}
	if n := strings.Count(t, "\uFFFD"); n >= 2 {
		return true, fmt.Sprintf("%d replacement characters (invalid UTF-8 from broken token ids)", n)
	}
	if r, n := punctRun(t); n > 0 {
		why := fmt.Sprintf("a run of %d %q", n, string(r))
		if r == '!' {
			why += ": at greedy decoding this is token 0 over and over, the usual sign of NaN logits"
		}
		return true, why
	}
	if !strings.ContainsFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return true, "punctuation-only output"
	}
	words := strings.Fields(t)
	mixed, scripts := mixedScriptWords(words)
	if mixed >= 2 || scripts >= 4 || (scripts >= 3 && mixed >= 1) {
		return true, fmt.Sprintf("multilingual token salad: %d scripts, %d words switch script mid-word", scripts, mixed)
	}
	if unit, n := wordLoop(words); n > 0 {
		return true, fmt.Sprintf("a loop: %q repeated %d times", unit, n)
	}
	if unit, n := runeLoop(t); n > 0 {
		return true, fmt.Sprintf("a loop: %q repeated %d times", unit, n)
	}
	if unit, n := repeatedSentence(t); n >= 3 {
		return true, fmt.Sprintf("the same sentence %d times: %q", n, clipRunes(unit, 60))
	}
	if share, ok := functionWordSoup(words); ok {
		return true, fmt.Sprintf("function-word soup (%.0f%% of the words are function words)", share*100)
	}
	if ratio, ok := repeatedNgrams(words); ok {
		return true, fmt.Sprintf("the text repeats itself (%.0f%% of its word 4-grams are repeats)", ratio*100)
	}
	if bad, total := malformedTokens(words); total >= 8 && bad*4 >= total {
		return true, fmt.Sprintf("mostly non-words (%d of %d tokens malformed)", bad, total)
	}
	return false, ""
}

// punctRun finds a run of one punctuation or symbol rune: 8 or more, or 40
// or more for characters that form markdown rules and ellipses.
func punctRun(s string) (rune, int) {
	var prev rune
	n := 0
	best, bestN := rune(0), 0
	flush := func() {
		limit := 8
		if strings.ContainsRune("-=_*#~.`", prev) {
			limit = 40
		}
		if n >= limit && n > bestN {
			best, bestN = prev, n
		}
	}
	for _, r := range s {
		if r == prev && (unicode.IsPunct(r) || unicode.IsSymbol(r)) {
			n++
			continue
		}
		flush()
		prev, n = r, 1
	}
	flush()
	return best, bestN
}

// scriptOf names a letter's script, folding the Japanese kana into Han so
// that ordinary Japanese does not count as mixed.
func scriptOf(r rune) string {
	for _, s := range []struct {
		name  string
		table *unicode.RangeTable
	}{
		{"Latin", unicode.Latin}, {"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek},
		{"Han", unicode.Han}, {"Han", unicode.Hiragana}, {"Han", unicode.Katakana},
		{"Hangul", unicode.Hangul}, {"Thai", unicode.Thai}, {"Arabic", unicode.Arabic},
		{"Hebrew", unicode.Hebrew}, {"Devanagari", unicode.Devanagari},
	} {
		if unicode.Is(s.table, r) {
			return s.name
		}
	}
	return ""
}

// mixedScriptWords counts words whose letters come from two scripts
// ("складаระ", "Keg治愈"): BPE pieces glued at random, not a language. It
// also returns how many scripts the text uses in all.
func mixedScriptWords(words []string) (mixed, scripts int) {
	n := 0
	all := map[string]bool{}
	for _, w := range words {
		for _, r := range w {
			if s := scriptOf(r); s != "" && unicode.IsLetter(r) {
				all[s] = true
			}
		}
		seen := ""
		for _, r := range w {
			if !unicode.IsLetter(r) {
				continue
			}
			s := scriptOf(r)
			if s == "" {
				continue
			}
			if seen == "" {
				seen = s
			} else if s != seen {
				n++
				break
			}
		}
	}
	return n, len(all)
}

// wordLoop finds a unit of 1 to 10 words repeated at least 4 times in a row.
func wordLoop(words []string) (string, int) {
	norm := make([]string, len(words))
	for i, w := range words {
		norm[i] = strings.ToLower(strings.TrimFunc(w, unicode.IsPunct))
	}
	for size := 1; size <= 10; size++ {
		for start := 0; start+size*4 <= len(norm); start++ {
			reps := 1
			for next := start + size; next+size <= len(norm) && equalWords(norm[start:start+size], norm[next:next+size]); next += size {
				reps++
			}
			// A unit without letters ("0 0 0 ...") must repeat longer: a
			// number can be said twice in a row on purpose.
			if reps >= 4 && hasLetter(norm[start:start+size]) || reps >= 8 && norm[start] != "" {
				return strings.Join(words[start:start+size], " "), reps
			}
		}
	}
	return "", 0
}

func equalWords(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hasLetter(ws []string) bool {
	for _, w := range ws {
		if strings.ContainsFunc(w, unicode.IsLetter) {
			return true
		}
	}
	return false
}

// runeLoop finds, in text without spaces (CJK, Korean), a unit of 1 to 20
// runes that contains a letter repeated at least 4 times in a row, covering at
// least 8 runes.
func runeLoop(s string) (string, int) {
	r := []rune(s)
	for size := 1; size <= 20; size++ {
		for start := 0; start+size*4 <= len(r); start++ {
			unit := r[start : start+size]
			if !containsLetter(unit) || containsSpace(unit) {
				continue
			}
			reps := 1
			for next := start + size; next+size <= len(r) && string(r[next:next+size]) == string(unit); next += size {
				reps++
			}
			if reps >= 4 && reps*size >= 8 {
				return string(unit), reps
			}
		}
	}
	return "", 0
}

func containsLetter(rs []rune) bool {
	for _, r := range rs {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

func containsSpace(rs []rune) bool {
	for _, r := range rs {
		if unicode.IsSpace(r) {
			return true
		}
	}
	return false
}

var sentenceSplitRe = regexp.MustCompile(`[.!?\n]+`)

// repeatedSentence finds the sentence (or line) of five words or more that
// occurs most often; a model in a loop says it again and again, with other
// text in between.
func repeatedSentence(t string) (string, int) {
	counts := map[string]int{}
	best, bestN := "", 0
	for _, s := range sentenceSplitRe.Split(t, -1) {
		s = strings.ToLower(strings.Join(strings.Fields(s), " "))
		if len(strings.Fields(s)) < 5 || !strings.ContainsFunc(s, unicode.IsLetter) {
			continue
		}
		counts[s]++
		if counts[s] > bestN {
			best, bestN = s, counts[s]
		}
	}
	return best, bestN
}

// englishFunctionWords are the commonest English function words; fluent
// English uses them for about half its words, collapsed output for nearly
// all.
var englishFunctionWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("the of and to in a is that for it as with was on be at by this had not are but from or have an they which one you were her all she there would their we him been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three the a an i he it's don't") {
		englishFunctionWords[w] = true
	}
}

func functionWordSoup(words []string) (float64, bool) {
	if len(words) < 16 {
		return 0, false
	}
	n := 0
	for _, w := range words {
		if englishFunctionWords[strings.ToLower(strings.TrimFunc(w, unicode.IsPunct))] {
			n++
		}
	}
	share := float64(n) / float64(len(words))
	return share, share >= 0.85
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// repeatedNgrams measures sentence loops: with 24 words or more, the share of
// word 4-grams that already occurred. Fluent text repeats few of them.
func repeatedNgrams(words []string) (float64, bool) {
	if len(words) < 24 {
		return 0, false
	}
	seen := map[string]bool{}
	repeats, total := 0, 0
	for i := 0; i+4 <= len(words); i++ {
		k := strings.ToLower(strings.Join(words[i:i+4], " "))
		if seen[k] {
			repeats++
		}
		seen[k] = true
		total++
	}
	ratio := float64(repeats) / float64(total)
	return ratio, ratio >= 0.5
}

var (
	numberTokRe = regexp.MustCompile(`^[+-]?\d+(?:[.,:/]\d+)*%?$`)
	wordTokRe   = regexp.MustCompile(`^\p{L}+(?:['’-]\p{L}+)*$`)
	// Identifiers like H200, Qwen3, fp4, x86-64, gpt-4o: letters and digits
	// with few switches between them.
	identTokRe = regexp.MustCompile(`^[\p{L}\d]+(?:[-_.][\p{L}\d]+)*$`)
)

// malformedTokens counts tokens that are neither words, numbers nor
// identifiers; punctuation-only tokens (math operators, dashes) are left out
// of both counts.
func malformedTokens(words []string) (bad, total int) {
	for _, w := range words {
		t := strings.TrimFunc(w, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) })
		if t == "" {
			continue
		}
		total++
		switch {
		case wordTokRe.MatchString(t) && caseSwitches(t) < 4, numberTokRe.MatchString(t):
		case identTokRe.MatchString(t) && switches(t) <= 1 && caseSwitches(t) < 4:
		default:
			bad++
		}
	}
	return bad, total
}

// caseSwitches counts lower/upper alternations in a token: "aSdFgH" has 5,
// "iPhone" 1, "McDonald" 3.
func caseSwitches(t string) int { return alternations(t, unicode.IsLower, unicode.IsUpper) }

// switches counts letter/digit alternations in a token: "6t8" has 2.
func switches(t string) int { return alternations(t, unicode.IsLetter, unicode.IsDigit) }

// alternations counts how often t switches between runes of class a and
// runes of class b; other runes are skipped.
func alternations(t string, a, b func(rune) bool) int {
	n, prev := 0, 0
	for _, r := range t {
		k := 0
		switch {
		case a(r):
			k = 1
		case b(r):
			k = 2
		}
		if k != 0 && prev != 0 && k != prev {
			n++
		}
		if k != 0 {
			prev = k
		}
	}
	return n
}

var numberRe = regexp.MustCompile(`[+-]?\d[\d,]*(?:\.\d+)?`)

var (
	numberWordRe = regexp.MustCompile(`(?i)\b(?:(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ](one|two|three|four|five|six|seven|eight|nine))?|(zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen))\b`)
	smallNumbers = map[string]float64{"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
		"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
		"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
	tens = map[string]float64{"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
)

// numbersIn extracts the numbers in s, in order: digits ("1,234" is one
// number) and English number words up to ninety-nine ("Four.").
func numbersIn(s string) []float64 {
	type hit struct {
		at int
		n  float64
	}
	var hits []hit
	for _, loc := range numberRe.FindAllStringIndex(s, -1) {
		m := strings.ReplaceAll(strings.TrimRight(s[loc[0]:loc[1]], ","), ",", "")
		if f, err := strconv.ParseFloat(m, 64); err == nil {
			hits = append(hits, hit{loc[0], f})
		}
	}
	for _, m := range numberWordRe.FindAllStringSubmatchIndex(s, -1) {
		var n float64
		if m[2] >= 0 {
			n = tens[strings.ToLower(s[m[2]:m[3]])]
			if m[4] >= 0 {
				n += smallNumbers[strings.ToLower(s[m[4]:m[5]])]
			}
		} else {
			n = smallNumbers[strings.ToLower(s[m[6]:m[7]])]
		}
		hits = append(hits, hit{m[0], n})
	}
	slices.SortFunc(hits, func(a, b hit) int { return a.at - b.at })
	out := make([]float64, len(hits))
	for i, h := range hits {
		out[i] = h.n
	}
	return out
}

// Meets checks an answer against its expectation and describes what was
// wanted. A nil expectation is met by any text.
//
// A number is met when the expected number is in the answer and it is either
// the last number or every other number also appears in the prompt ("323 is
// 300 plus 23"); a list that merely passes the number on its way (counting
// to 400) does not meet it. Contains is case-sensitive, or a whole word in
// any case ("ok" for "OK", not "okay").
func Meets(e *evidence.Expect, answer, prompt string) (bool, string) {
	want := e.String()
	switch {
	case e == nil:
		return true, want
	case e.Number != nil:
		nums := numbersIn(answer)
		if len(nums) == 0 {
			return false, want
		}
		// The last number (a worked sum ends on its result), or the first
		// number that is not one of the prompt's operands ("4. In binary,
		// 100").
		if nums[len(nums)-1] == *e.Number {
			return true, want
		}
		inPrompt := numbersIn(prompt)
		for _, n := range nums {
			if !slices.Contains(inPrompt, n) {
				return n == *e.Number, want
			}
		}
		return false, want
	case e.Contains != "":
		if strings.Contains(answer, e.Contains) {
			return true, want
		}
		re := regexp.MustCompile(`(?i)(^|[^\p{L}\p{N}])` + regexp.QuoteMeta(e.Contains) + `($|[^\p{L}\p{N}])`)
		return re.MatchString(answer), want
	case e.Regex != "":
		re, err := regexp.Compile(e.Regex)
		return err == nil && re.MatchString(answer), want
	default:
		return strings.TrimSpace(answer) == strings.TrimSpace(e.Exact), want
	}
}
