package classify

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// numberRe matches a number written in digits: "1,234" (commas only as
// thousands separators, so "3,23" is two numbers), "-4", "2.5".
var numberRe = lazyRE(`[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[+-]?\d+(?:\.\d+)?`)

var (
	numberWordRe = lazyRE(`(?i)\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million)(?:(?:[\s-]+|\s+and\s+)(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million)\b)*\b`)
	wordValues   = map[string]float64{"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
		"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
		"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
		"fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
	// negationRe ends in a word that denies what follows: "not 323",
	// "isn't 5", "never say OK", "instead of 12".
	negationRe = lazyRE(`(?i)(?:\bnot|n't|\bnever|\bcannot|\binstead of|\brather than|\bwon't say|\brefuse to say)(?:\s+[^\s\d;,.:!?]+){0,2}\s*['"“‘]?$`)
	// correctionRe marks a self-correction: what follows replaces what came
	// before.
	correctionRe = lazyRE(`(?i)\b(?:wait|actually|correction|sorry|i mean|let me re-?(?:check|calculate|compute)|on second thought)\b|\bno[,.!]`)
)

// englishNumber reads a run of number words: "three hundred and
// twenty-three" is 323, "one thousand two hundred" 1200.
func englishNumber(s string) (float64, bool) {
	total, cur := 0.0, 0.0
	seen := false
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ' ' || r == '-' || unicode.IsSpace(r) }) {
		switch w {
		case "and":
		case "hundred":
			cur = max(cur, 1) * 100
		case "thousand", "million":
			mult := 1000.0
			if w == "million" {
				mult = 1e6
			}
			total += max(cur, 1) * mult
			cur = 0
		default:
			v, ok := wordValues[w]
			if !ok {
				return 0, false
			}
			cur += v
		}
		seen = true
	}
	return total + cur, seen
}

// negatedBefore is negationRe.MatchString(s) asked of the end of s
// alone: the expression ends at $, and what it can match there (an
// optional closing quote, spaces, two words at most, each after spaces,
// and a negation of at most 15 bytes) lies within the last two words and
// the spaces around them, plus a margin for the negation and the byte
// before it (\b). Asking the whole text before every number of a long
// answer made numbersIn quadratic.
func negatedBefore(s string) bool {
	return negationRe.MatchString(s[negationTail(s):])
}

// negationTail is where the part of s that negationRe can match at its
// end begins: the rest of s cannot change the answer.
func negationTail(s string) int {
	i := len(s)
	if r, n := utf8.DecodeLastRuneInString(s); strings.ContainsRune(`'"“‘`, r) {
		i -= n
	}
	isSpace := func(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r' } // \s
	skip := func(space bool) {
		for i > 0 && isSpace(s[i-1]) == space {
			i--
		}
	}
	skip(true)
	skip(false)
	skip(true)
	skip(false)
	skip(true)
	return max(0, i-24)
}

type number struct {
	at, end int
	n       float64
	negated bool
}

// numbersIn extracts the numbers in s, in order: digits and English number
// words ("Four.", "three hundred twenty-three"), each marked when a negation
// comes right before it.
func numbersIn(s string) []number { return numbersOf(s, true) }

// numbersOf is numbersIn, with the negations looked for only when asked
// (a prompt's numbers are operands, negated or not).
func numbersOf(s string, negations bool) []number {
	var out []number
	add := func(at, end int, n float64) {
		out = append(out, number{at: at, end: end, n: n, negated: negations && negatedBefore(s[:at])})
	}
	for _, loc := range numberRe.FindAllStringIndex(s, -1) {
		// A digit glued to a letter ("H200", "fp4") is part of a name.
		if loc[0] > 0 && isLetterBefore(s, loc[0]) {
			continue
		}
		if f, err := strconv.ParseFloat(strings.ReplaceAll(s[loc[0]:loc[1]], ",", ""), 64); err == nil {
			add(loc[0], loc[1], f)
		}
	}
	for _, loc := range numberWordRe.FindAllStringIndex(s, -1) {
		if f, ok := englishNumber(s[loc[0]:loc[1]]); ok {
			add(loc[0], loc[1], f)
		}
	}
	slices.SortFunc(out, func(a, b number) int { return a.at - b.at })
	return out
}

// isLetterBefore reports a Latin, Greek or Cyrillic letter right before
// s[i]: "H200" and "fp4" are names. Chinese and Japanese write numbers
// against their letters ("等于42", "答えは42です").
func isLetterBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(r) && !isCJK(scriptOf(r)) && !unicode.Is(unicode.Thai, r)
}

// finalNumber picks the answer a reply states: numbers that are denied do
// not count; after a self-correction only what follows counts; then the
// last number that is not one of the prompt's operands (a worked sum ends
// on its result), or the first such one when later numbers restate it in
// another form ("4. In binary that is 100."), which is told apart by the
// absence of any equals sign or answer marker before the later numbers.
func finalNumber(answer, prompt string) (float64, bool) {
	nums := numbersIn(answer)
	if locs := correctionRe.FindAllStringIndex(answer, -1); len(locs) > 0 {
		cut := locs[len(locs)-1][1]
		after := slices.DeleteFunc(slices.Clone(nums), func(n number) bool { return n.at < cut })
		if len(after) > 0 {
			nums = after
		}
	}
	nums = slices.DeleteFunc(nums, func(n number) bool { return n.negated })
	if len(nums) == 0 {
		return 0, false
	}
	var operands []float64
	for _, n := range numbersOf(prompt, false) {
		operands = append(operands, n.n)
	}
	var fresh []number
	for _, n := range nums {
		if !slices.Contains(operands, n.n) {
			fresh = append(fresh, n)
		}
	}
	if len(fresh) == 0 {
		return nums[len(nums)-1].n, true
	}
	first, last := fresh[0], fresh[len(fresh)-1]
	if first.at != last.at && !answerMarkerRe.MatchString(answer[first.end:last.at]) {
		return first.n, true
	}
	return last.n, true
}

// answerMarkerRe is what comes before a result: "=", "is", "equals",
// "answer", "total", "so", "therefore", "→".
var answerMarkerRe = lazyRE(`(?i)=|\bequals?\b|\banswer\b|\btotal\b|\btherefore\b|\bthus\b|\bgives\b|→|\bmakes\b|\bresult\b`)

// foldWidth maps full-width forms to ASCII ("ＯＫ" is "OK").
func foldWidth(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 0xFF01 && r <= 0xFF5E {
			return r - 0xFEE0
		}
		if r == 0x3000 {
			return ' '
		}
		return r
	}, s)
}

// Meets checks an answer against its expectation and describes what was
// wanted. A nil expectation is met by any text.
//
//   - A number is met by the answer's final stated number (see finalNumber):
//     "It is not 323; it is 324" and "323... wait, 325" are not 323; "3,23"
//     is no number 323; number words are read ("three hundred twenty-three").
//   - Contains matches a whole word or phrase in any case and width (not
//     BOOK or TOKEN for OK; "ＯＫ" and "OK." are OK; "Okay" is not, unless
//     the probe asks for it with a regex such as (?i)\bok(ay)?\b), and
//     not where a negation comes right before ("NOT OK", "I will not say
//     OK") or inside an echo of the prompt. In CJK a substring is enough.
//   - Count is met by the numbers 1 to N in order and nothing else: no
//     prose between them, no second round, no overshoot.
func Meets(e *evidence.Expect, answer, prompt string) (bool, string) {
	want := e.String()
	answer = foldWidth(answer)
	switch {
	case e == nil:
		return true, want
	case e.Number != nil:
		n, ok := finalNumber(answer, prompt)
		return ok && n == *e.Number, want
	case e.Count > 0:
		return countMet(strings.TrimSpace(answer), e.Count), want
	case e.Contains != "":
		return containsWord(answer, foldWidth(e.Contains), prompt), want
	case e.Regex != "":
		re, err := regexp.Compile(e.Regex)
		return err == nil && re.MatchString(answer), want
	default:
		return strings.TrimSpace(answer) == strings.TrimSpace(e.Exact), want
	}
}

func containsWord(answer, want, prompt string) bool {
	// An echo of the prompt says nothing of the model's own.
	if p := strings.TrimSpace(prompt); len(p) >= 4 {
		answer = regexp.MustCompile(`(?i)`+regexp.QuoteMeta(p)).ReplaceAllString(answer, " ")
	}
	body := regexp.QuoteMeta(want)
	expr := `(?i)(?:^|[^\p{L}\p{N}])(` + body + `)(?:$|[^\p{L}\p{N}])`
	if r := []rune(want); len(r) > 0 && (isCJK(scriptOf(r[0])) || isCJK(scriptOf(r[len(r)-1]))) {
		expr = `(?i)()(` + body + `)`
	}
	re := regexp.MustCompile(expr)
	for _, m := range re.FindAllStringSubmatchIndex(answer, -1) {
		start := m[len(m)-2]
		if !negatedBefore(answer[:start]) {
			return true
		}
	}
	return false
}

var countTokRe = lazyRE(`\d+|[^\d\s,;.、，]+`)

// countMet reports an answer to "count from 1 to n": the numbers 1..n in
// order, separated by marks and spaces only, and nothing after them but a
// closing mark. A lead-in may come first ("Here are the numbers from 1 to
// 50:"); the count starts at the first "1" that a "2" follows, and a second
// round, an overshoot or prose between the numbers fails it.
func countMet(answer string, n int) bool {
	toks := countTokRe.FindAllString(answer, -1)
	for i := 0; i+1 < len(toks); i++ {
		if toks[i] != "1" || toks[i+1] != "2" && n > 1 {
			continue
		}
		rest := toks[i:]
		if len(rest) < n {
			return false
		}
		for k := range n {
			if rest[k] != strconv.Itoa(k+1) {
				return false
			}
		}
		for _, t := range rest[n:] {
			if t != "!" && t != "。" {
				return false
			}
		}
		return true
	}
	return n == 1 && strings.Trim(answer, " .\n") == "1"
}
