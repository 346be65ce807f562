package classify

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// repetitionCues are words of a prompt that asks for repeated text.
var repetitionCues = newCue(`(?i)repeat|\btimes\b|again|\blist\b|matrix|table|grid|array|\bzero|ones\b|placeholder|template|fill|copies|twice|thrice|hex ?dump|\bbytes\b|buffer|padding|每|重复|繰り返|반복`)

// countedRe finds a prompt that asks for something two times or more, or
// to repeat it, in the languages whose words repetitionCues does not hold:
// "zehnmal", "5 mal", "cinq fois", "diez veces", "cinque volte", "vijf
// keer", "десять раз", "说十遍", "写五次", "５回", "열 번", and the verbs
// (wiederhole, répète, repite, ripeti, herhaal, powtórz, tekrarla,
// повтори). The word for "times" must follow a number (countNumbers):
// alone it says "once upon a time" (il était une fois), "sometimes" (a
// veces, às vezes) or "this time" (deze keer), and "mal" and "번" end
// other words ("normal", "Denkmal").
var countedRe = lazyRE(`(?i)(?:^|[^\p{L}])(?:\d+|` + countNumbers + `)\s+(?:fois|veces|vezes|volte|keer|razy|kez|kere|раза?)(?:$|[^\p{L}])` +
	`|(?:\d|zwei|drei|vier|fünf|sechs|sieben|acht|neun|zehn|elf|zwölf|zig|ßig|hundert)\s*-?mal(?:$|[^\p{L}])` +
	`|[0-9二两三四五六七八九十百][0-9一二两三四五六七八九十百]*\s*(?:次|遍|回)` +
	`|(?:\d|두|세|네|다섯|여섯|일곱|여덟|아홉|열|스무)\s*번` +
	`|wiederhol|répét|repit|repet|ripet|herhaal|powtórz|tekrar|повтор|反复|反復`)

// countNumbers are the numbers from two up, in words, that come before
// "times" in French, Spanish, Portuguese, Italian, Dutch, Polish, Turkish
// and Russian ("one time" is no repetition).
const countNumbers = `deux|trois|quatre|cinq|six|sept|huit|neuf|dix|onze|douze|quinze|vingt|cent|plusieurs` +
	`|dos|tres|cuatro|cinco|seis|siete|ocho|nueve|diez|doce|quince|veinte|cien|varias|muchas` +
	`|duas|dois|três|quatro|sete|oito|nove|dez|vinte|cem|várias|muitas` +
	`|due|tre|quattro|cinque|sei|sette|otto|dieci|venti|cento|molte` +
	`|twee|drie|vier|vijf|zes|zeven|acht|negen|tien|twintig|honderd` +
	`|dwa|dwie|trzy|cztery|pięć|sześć|siedem|osiem|dziewięć|dziesięć|dwadzieścia|sto` +
	`|iki|üç|dört|beş|altı|yedi|sekiz|dokuz|on|yirmi|yüz` +
	`|два|две|три|четыре|пять|шесть|семь|восемь|девять|десять|двадцать|сто|несколько`

// countedCue holds a literal that every match of countedRe holds: the
// cheap check first, as a cue reads the prompt once.
var countedCue = newCue(`(?i)mal|fois|veces|vezes|volte|keer|razy|kez|kere|раз|次|遍|回|번|wiederhol|répét|repit|repet|ripet|herhaal|powtórz|tekrar|повтор|反复|反復`)

// asksRepetition reports a prompt that asks for repeated text: the words
// of repetitionCues, or a count of times in any language (countedRe).
func asksRepetition(prompt string) bool {
	return prompt != "" && (repetitionCues.MatchString(prompt) ||
		countedCue.MatchString(prompt) && countedRe.MatchString(foldWidth(prompt)))
}

// allowedLoop reports a loop the prompt asked for: its unit is in the
// prompt, or it is numbers and the prompt asks for a matrix or a list.
func allowedLoop(unit string, c textContext) bool {
	if !c.repeats {
		return false
	}
	u := strings.ToLower(strings.TrimFunc(unit, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) }))
	return u == "" || strings.Contains(strings.ToLower(c.prompt), u) || !strings.ContainsFunc(u, unicode.IsLetter)
}

// loops finds a loop of words, of items or of characters that the prompt
// did not ask for. A loop of words does not run across the items of a
// list or the cells of a table: those repeat one another by design (a
// feature matrix of "Yes"), and only the same item over and over loops.
func loops(t string, c textContext) string {
	if unit, n := wordLoop(fieldsOf(t)); n > 0 && !allowedLoop(unit, c) {
		return fmt.Sprintf("a loop: %q repeated %d times", unit, n)
	}
	if unit, n := itemLoop(t); n > 0 && !allowedLoop(unit, c) {
		return fmt.Sprintf("a loop: the item %q repeated %d times", clipRunes(unit, 60), n)
	}
	if unit, n := runeLoop(t); n > 0 && !allowedLoop(unit, c) {
		return fmt.Sprintf("a loop: %q repeated %d times", clipRunes(unit, 60), n)
	}
	return ""
}

// wordLoop finds a unit of 1 to 10 words repeated at least 4 times in a
// row; a unit that holds an item separator (sep) is none.
func wordLoop(words []string, sep []bool) (string, int) {
	norm := make([]string, len(words))
	for i, w := range words {
		norm[i] = strings.ToLower(strings.TrimFunc(w, unicode.IsPunct))
	}
	for size := 1; size <= 10; size++ {
		for start := 0; start+size*4 <= len(norm); start++ {
			if slices.Contains(sep[start:start+size], true) {
				continue
			}
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

// runeLoop finds a unit of 1 to 64 characters without spaces repeated with
// nothing between: 4 times over at least 8 characters when the unit has a
// letter (CJK loops, "<|fim_middle|><|fim_suffix|>" pairs), over at least
// 16 characters when it has none (a repeating decimal is written short).
// In a text with a table, a unit that holds a pipe spans cells, which
// repeat one another by design ("|Yes|Yes|Yes|Yes|").
func runeLoop(s string) (string, int) {
	r := []rune(s)
	table := slices.ContainsFunc(strings.Split(s, "\n"), func(l string) bool { return tableRow(strings.TrimSpace(l)) })
	for size := 1; size <= 64; size++ {
		for start := 0; start+size*3 <= len(r); start++ {
			unit := r[start : start+size]
			if containsSpace(unit) || !unicode.IsLetter(unit[0]) && strings.Count(string(unit), string(unit[0])) == size ||
				table && slices.Contains(unit, '|') {
				// Runs of one mark or digit are charRuns' to judge, with
				// its exceptions for emphasis; cells fenced by pipes are
				// items (itemLoop's).
				continue
			}
			reps := 1
			for next := start + size; next+size <= len(r) && string(r[next:next+size]) == string(unit); next += size {
				reps++
			}
			letter := containsLetter(unit)
			if letter && (reps >= 4 && reps*size >= 8 || reps >= 3 && size >= 12) || !letter && reps >= 4 && reps*size >= 16 {
				return string(unit), reps
			}
			if reps > 1 {
				start += (reps - 1) * size
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

// loopRepeats is how many times a sentence is said in a loop.
const loopRepeats = 4

var sentenceSplitRe = lazyRE(`[.!?。！？\n]+`)

// sentenceLoop finds a sentence of five words or more said four times or
// more, counting near-copies (80% of their words shared) as the same: a
// model in a loop says it again and again, with other text in between. A
// small model that says a sentence two or three times, or a reasoning that
// checks itself three times, is not a loop.
func sentenceLoop(t string, c textContext) string {
	if c.loopsAllowed {
		return ""
	}
	if unit, n := repeatedSentence(t); n >= loopRepeats && !askedWords(strings.Fields(unit), c) {
		return fmt.Sprintf("the same sentence %d times: %q", n, clipRunes(unit, 60))
	}
	return ""
}

// askedWords reports words that a prompt asking for repetition holds, all
// of them or all but one in five ("Write 'I will not talk in class' five
// times"): said over and over, they are what was asked.
func askedWords(words []string, c textContext) bool {
	if len(words) == 0 || !c.repeats {
		return false
	}
	n := 0
	for _, w := range words {
		if c.promptWords[strings.ToLower(strings.TrimFunc(w, unicode.IsPunct))] {
			n++
		}
	}
	return n*5 >= len(words)*4
}

// promptWords are the prompt's words, lower case, without their marks.
func promptWords(prompt string) map[string]bool {
	in := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(prompt)) {
		in[strings.TrimFunc(w, unicode.IsPunct)] = true
	}
	return in
}

// repeatedSentence finds the sentence (or line) of five words or more that
// occurs most often, near-copies included.
func repeatedSentence(t string) (string, int) {
	type cluster struct {
		text  string
		words map[string]bool
		n     int
	}
	var cs []*cluster
	best, bestN := "", 0
	for _, s := range sentenceSplitRe.Split(t, -1) {
		f := strings.Fields(strings.ToLower(s))
		if len(f) < 5 || !strings.ContainsFunc(s, unicode.IsLetter) || len(cs) > 200 {
			continue
		}
		set := map[string]bool{}
		for _, w := range f {
			set[strings.TrimFunc(w, unicode.IsPunct)] = true
		}
		var into *cluster
		for _, c := range cs {
			if jaccard(c.words, set) >= 0.8 {
				into = c
				break
			}
		}
		if into == nil {
			into = &cluster{text: strings.Join(f, " "), words: set}
			cs = append(cs, into)
		}
		into.n++
		if into.n > bestN {
			best, bestN = into.text, into.n
		}
	}
	return best, bestN
}

func jaccard(a, b map[string]bool) float64 {
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	union := len(a) + len(b) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}
