package classify

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokens splits text at white space.
func tokens(t string) []string { return strings.Fields(t) }

type window struct {
	name string
	toks []string
}

// windows are the token spans the ratio detectors measure: the whole text,
// and its last third (16 tokens at least) when the text is long enough for
// the two to differ, so a fluent start cannot hide a collapse at the end.
func windows(toks []string) []window {
	ws := []window{{"", toks}}
	if n := len(toks); n >= 32 {
		ws = append(ws, window{"the tail collapses: ", toks[n-max(16, n/3):]})
		if n/3 > 16 {
			ws = append(ws, window{"the end collapses: ", toks[n-16:]})
		}
	}
	return ws
}

// ratios runs the detectors that measure a share of tokens.
func ratios(toks []string, whole string, c textContext) string {
	if share, ok := functionWordSoup(toks); ok {
		return fmt.Sprintf("function-word soup (%.0f%% of the words are function words)", share*100)
	}
	if ratio, ok := repeatedNgrams(toks, c); ok {
		return fmt.Sprintf("the text repeats itself (%.0f%% of its word 4-grams are repeats)", ratio*100)
	}
	if bad, total := malformedTokens(toks); total >= 8 && bad*4 >= total {
		return fmt.Sprintf("mostly non-words (%d of %d tokens malformed)", bad, total)
	}
	if frag, total := fragments(toks, cjkShare(whole) >= 0.5); total >= 10 && frag*5 >= total*2 {
		return fmt.Sprintf("broken into fragments (%d of %d tokens are stray punctuation or stray function words)", frag, total)
	}
	return ""
}

// englishFunctionWords are the commonest English function words; fluent
// English uses them for about half its words, collapsed output for nearly
// all. They also mark English words strewn into CJK text.
var englishFunctionWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("the of and to in a is that for it as with was on be at by this had not are but from or have an they which one you were her all she there would their we him been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three the a an i he it's don't") {
		englishFunctionWords[w] = true
	}
}

func isFunctionWord(w string) bool {
	return englishFunctionWords[strings.ToLower(strings.TrimFunc(w, unicode.IsPunct))]
}

func functionWordSoup(words []string) (float64, bool) {
	if len(words) < 16 {
		return 0, false
	}
	n := 0
	for _, w := range words {
		if isFunctionWord(w) {
			n++
		}
	}
	share := float64(n) / float64(len(words))
	return share, share >= 0.85
}

// repeatedNgrams measures sentence loops: with 24 words or more, the share of
// word 4-grams that already occurred. Fluent text repeats few of them; a
// 4-gram of words that a prompt asking for repetition holds is what was
// asked (see askedWords).
func repeatedNgrams(words []string, c textContext) (float64, bool) {
	if len(words) < 24 {
		return 0, false
	}
	seen := map[string]bool{}
	repeats, total := 0, 0
	for i := 0; i+4 <= len(words); i++ {
		k := strings.ToLower(strings.Join(words[i:i+4], " "))
		if seen[k] && !askedWords(words[i:i+4], c) {
			repeats++
		}
		seen[k] = true
		total++
	}
	ratio := float64(repeats) / float64(total)
	return ratio, ratio >= 0.5
}

var (
	numberTokRe = lazyRE(`^[+-]?\d+(?:[.,:/]\d+)*%?$`)
	// Words may carry combining marks (Hindi and Thai vowel signs).
	wordTokRe = lazyRE(`^\p{L}[\p{L}\p{M}]*(?:['’-]\p{L}[\p{L}\p{M}]*)*$`)
	// Identifiers like H200, Qwen3, fp4, x86-64, gpt-4o: letters and digits
	// with few switches between them.
	identTokRe = lazyRE(`^[\p{L}\p{M}\d]+(?:[-_.][\p{L}\p{M}\d]+)*$`)
	digitRunRe = lazyRE(`\d+(?:[.,]\d+)*`)
)

// malformedTokens counts tokens that are neither words, numbers nor
// identifiers; punctuation-only tokens (math operators, dashes) are left out
// of both counts. A token of CJK text holds a whole clause with its
// punctuation, so it is split at punctuation first.
func malformedTokens(words []string) (bad, total int) {
	for _, w := range words {
		// A code span holds an identifier, not a word.
		if len(w) > 2 && strings.HasPrefix(w, "`") && strings.HasSuffix(strings.TrimRight(w, ".,;:"), "`") {
			continue
		}
		for _, t := range strings.FieldsFunc(w, func(r rune) bool {
			return (unicode.IsPunct(r) || unicode.IsSymbol(r)) && r >= 0x2000
		}) {
			t = strings.TrimFunc(t, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) })
			if t == "" {
				continue
			}
			// A full-width digit is a digit ("１００"), and Chinese and
			// Japanese write numbers against their words ("水は100度で").
			t = foldWidth(t)
			if cjkShare(t) > 0 {
				t = strings.TrimSpace(digitRunRe.ReplaceAllString(t, " "))
				if t == "" || strings.Contains(t, " ") {
					continue
				}
			}
			total++
			switch {
			case wordTokRe.MatchString(t) && (caseSwitches(t) < 4 || camelCase(t)) && !vowelless(t), numberTokRe.MatchString(t):
			case !strings.ContainsFunc(t, func(r rune) bool { return !unicode.IsNumber(r) }): // "①", "Ⅻ"
			case identTokRe.MatchString(t) && switches(t) <= 1 && (caseSwitches(t) < 4 || camelCase(t)) && !vowelless(t):
			default:
				bad++
			}
		}
	}
	return bad, total
}

// camelCase reports an identifier such as getElementsByClassName or
// AutoModelForCausalLM: pieces of three letters on average between its
// humps, where "aSdFgH" has pieces of one or two.
func camelCase(t string) bool {
	pieces, letters := 1, 0
	var prev rune
	for _, r := range t {
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				pieces++
			}
		}
		prev = r
	}
	return letters >= 3*pieces
}

// vowelless reports a lower-case Latin word of four letters or more with no
// vowel ("xqzt", "vbnrk"): no Latin-script language writes one.
func vowelless(t string) bool {
	r := []rune(t)
	if len(r) < 4 || strings.ToLower(t) != t || !isLatinWord(r) {
		return false
	}
	return !strings.ContainsAny(t, "aeiouyàáâãäåèéêëìíîïòóôõöùúûüýÿæøœ")
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

// operatorTokens are punctuation-only tokens that fluent text has: math
// operators, markdown markers, arrows, LaTeX delimiters, ellipses, dashes.
var operatorTokens = map[string]bool{}

func init() {
	for _, t := range strings.Fields("- + = * / | # ## ### > < ~ ^ & — – → ← ⇒ • · ... … \\( \\) \\[ \\] $ $$ ``` -> => * ** × ÷ ± ≈ ≤ ≥ : ? !") {
		operatorTokens[t] = true
	}
}

// fragments counts stray tokens: punctuation that stands alone (fluent text
// attaches it to words) and, in CJK text, Latin function words and single
// letters (Latin terms in Chinese are names, not "the" or "of").
func fragments(toks []string, cjkText bool) (frag, total int) {
	for _, t := range toks {
		total++
		core := strings.TrimFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		switch {
		case core == "" && !operatorTokens[t]:
			frag++
		case cjkText && core == t && isLatinWord([]rune(t)) && (len(t) <= 3 && strings.ToLower(t) == t || isFunctionWord(t)):
			frag++
		case core != "" && len([]rune(core)) <= 2 && strings.IndexFunc(core, func(r rune) bool { return r < 0x3131 || r > 0x318E }) < 0:
			frag++ // lone Hangul jamo ("ㄱ ㅏ"): letters of no syllable
		}
	}
	return frag, total
}

var (
	// gluedDigitRe is a word glued to a digit run: "the2931", "report0.14,55".
	gluedDigitRe = lazyRE(`^(\p{L}{2,})(\d[\d.,]*)$`)
	// danglingRe is an article, preposition or conjunction right before a
	// comma or full stop: "the, capital", "and the of.".
	danglingRe = lazyRE(`(?i)(?:^|\s)(?:the|an|of|and|or)[,.;:](?:\s|$)`)
	// badBigramRe is an article followed by another function word, which
	// English never writes: "the of", "a the", "the is".
	badBigramRe   = lazyRE(`(?i)(?:^|\s)(?:(?:the|a|an)\s+(?:the|a|an|of|is|are|was|were|and|or|to|in)|of\s+(?:and|or|to|in|is|are|was|were))(?:\s|[,.;:]|$)`)
	inlineHeading = lazyRE(`[^\n#]\s#{2,6}\s`)
	codeSpanRe    = lazyRE("`[^`]*`")
	// allowedDoubles are words that English says twice on purpose.
	allowedDoubles = map[string]bool{"that": true, "had": true, "long": true, "very": true, "really": true, "bye": true,
		"so": true, "no": true, "yes": true, "ha": true, "hey": true, "well": true, "there": true, "now": true,
		"knock": true, "blah": true, "is": false, "many": true, "more": true, "tick": true, "tock": true, "go": true}
)

// weakSigns sums signs that are each too weak alone, and too few in a short
// reply for any ratio: a salad of three tokens is still a salad. Garbage at
// 3 points, or at 2 in a reply of 16 tokens or fewer.
func weakSigns(t string, toks []string, c textContext) string {
	var why []string
	score := 0
	add := func(n int, what string) {
		if n > 0 {
			score += n
			why = append(why, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(strings.Count(t, "\uFFFD"), "replacement character(s)")
	mixed, _ := mixedScriptWords(toks, cjkShare(t) >= 0.3)
	add(mixed, "mixed-script word(s)")
	plain := codeSpanRe.ReplaceAllString(t, " ")
	glued, camel, mixedIDs, overlong, suffixes := 0, 0, 0, 0, 0
	lang := languageOf(t)
	compounding := lang == "German" || lang == "Dutch"
	for _, w := range strings.Fields(plain) {
		core := strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		need := 3 // "H2O2" and "mp4v2" are names; letters and digits shuffled further are not
		if r, _ := utf8.DecodeRuneInString(core); !unicode.Is(unicode.Latin, r) {
			need = 2 // no other script writes names that way ("ال12ب")
		}
		if switches(core) >= need && !strings.ContainsAny(core, "-_.:/") && len(core) < 24 {
			mixedIDs++
		}
		if suffixPieces[strings.ToLower(core)] {
			suffixes++ // "ingly", "ationally": the ends of words, alone
		}
		overlong += overlongWeight(strings.TrimFunc(w, unicode.IsPunct), c.prompt, compounding)
		w = strings.TrimFunc(w, func(r rune) bool { return unicode.IsPunct(r) && r != ',' && r != '.' || unicode.IsSymbol(r) })
		w = strings.TrimRight(w, ".,")
		if m := gluedDigitRe.FindStringSubmatch(w); m != nil && (isFunctionWord(m[1]) || strings.Contains(m[2], ",")) {
			glued++
		}
		if gluedPieces(w) {
			camel++
		}
	}
	add(glued, "word(s) glued to digits")
	add(mixedIDs, "token(s) shuffling letters and digits")
	add(overlong, "overlong run(s) of glued pieces")
	add(suffixes, "word ending(s) standing alone")
	add(hanSpaces(t), "space(s) breaking Chinese or Japanese text apart")
	add(germanicSalad(plain), "article(s) doubled or dangling (German, French, Spanish)")
	add(camel, "run(s) of glued sub-word pieces")
	if !c.repeats {
		add(doubledWords(toks, c.prompt), "doubled word(s)")
	}
	add(len(danglingRe.FindAllString(plain, -1)), "article(s) or preposition(s) before punctuation")
	add(len(badBigramRe.FindAllString(plain, -1)), "article(s) followed by a function word")
	if last := strings.ToLower(strings.TrimRight(lastOf(toks), "\"'”’)")); !c.truncated && danglingEnd[last] {
		add(1, "reply(ies) ending on an article or preposition")
	}
	if wordList(plain, c.prompt) {
		add(2, "sentence(s) of content words with no grammar")
	}
	if inlineHeading.MatchString(t) {
		add(1, "markdown heading(s) in mid-line")
	}
	if score >= 3 || score >= 2 && len(toks) <= 16 {
		return "broken text: " + strings.Join(why, ", ")
	}
	return ""
}

// suffixPieces are English word endings that are never words alone.
var suffixPieces = map[string]bool{}

func init() {
	for _, w := range strings.Fields("ingly ationally entially ational ations ation ization isation izations ness nesses ment ments tion tions sion sions ously ically ility ilities ities ance ences ence ively fulness lessness ings edly") {
		suffixPieces[w] = true
	}
}

// overlongWeight weighs a run of letters glued without a hump: 40 letters
// or more in any spaced script is no word (2); 22 or more Latin letters in
// lower case, or capitalised outside German and Dutch (which compound), 1,
// and 2 from 30; a word the prompt holds is not counted.
func overlongWeight(w, prompt string, compounding bool) int {
	r := []rune(w)
	if len(r) < 22 || strings.Contains(strings.ToLower(prompt), strings.ToLower(w)) {
		return 0
	}
	letters := true
	for _, c := range r {
		if !unicode.IsLetter(c) && !unicode.Is(unicode.Mn, c) {
			letters = false
		}
		if isCJK(scriptOf(c)) || unicode.Is(unicode.Thai, c) {
			return 0 // no spaces in these scripts: a clause is one token
		}
	}
	switch {
	case !letters:
		return 0
	case len(r) >= 40 && !compounding:
		return 3 // no language but the compounding ones writes such a word
	case !isLatinWord(r):
		return 0
	case strings.ToLower(w) != w && (compounding || !unicode.IsUpper(r[0]) || strings.ToLower(w[1:]) != w[1:]):
		return 0
	case len(r) >= 30:
		return 2
	}
	return 1
}

var hanSpaceRe = lazyRE(`[\p{Han}\p{Hiragana}\p{Katakana}] +[\p{Han}\p{Hiragana}\p{Katakana}]`)

// hanSpaces weighs spaces between Chinese or Japanese characters, which
// fluent text does not write: 2 from three such gaps, 3 from six.
func hanSpaces(t string) int {
	switch n := len(hanSpaceRe.FindAllStringIndex(t, -1)); {
	case n >= 6:
		return 3
	case n >= 3:
		return 2
	}
	return 0
}

var germanicArticleRe = lazyRE(`(?i)(?:^|\s)(?:der|das|den|dem|des|ein|eine|le|les|une|du|el|los|las|una)(?:\s+(?:der|die|das|den|dem|des|ein|eine|und|ist|le|la|les|un|une|et|est|el|los|las|y|es)\b|[,.;:](?:\s|$))`)

// germanicSalad counts articles doubled or dangling before punctuation in
// German, French and Spanish ("der die", "le la", "el.").
func germanicSalad(t string) int { return len(germanicArticleRe.FindAllString(t, -1)) }

var danglingEnd = map[string]bool{"the": true, "a": true, "an": true, "of": true, "and": true, "or": true, "is": true, "with": true}

func lastOf(toks []string) string {
	if len(toks) == 0 {
		return ""
	}
	return toks[len(toks)-1]
}

// wordList reports an English reply of eight words or more on one line, with
// no commas, colons or list marks, and not one function word: content words
// strung together ("France Paris capital city Europe Seine river tower").
func wordList(t, prompt string) bool {
	if strings.ContainsAny(t, "\n,:;|-•*") || languageOf(prompt) != "English" {
		return false
	}
	words := strings.Fields(t)
	if len(words) < 8 {
		return false
	}
	for _, w := range words {
		if isFunctionWord(w) || !isLatinWord([]rune(strings.TrimFunc(w, unicode.IsPunct))) {
			return false
		}
	}
	return true
}

// gluedPieces reports a long Latin token made of pieces glued with a case
// hump in mid-word ("ForwardRefrikatuwong"): 14 letters or more, a lower-
// case letter followed by a capital, not an identifier written as code.
func gluedPieces(w string) bool {
	r := []rune(w)
	if len(r) < 14 || !isLatinWord(r) {
		return false
	}
	for i := 1; i < len(r); i++ {
		if unicode.IsLower(r[i-1]) && unicode.IsUpper(r[i]) {
			// The piece after the hump runs on in lower case for long:
			// PreTrainedTokenizer has short humps, glued BPE long ones.
			j := i + 1
			for j < len(r) && unicode.IsLower(r[j]) {
				j++
			}
			if j-i >= 8 {
				return true
			}
		}
	}
	return false
}

// saidTwiceIn reports a prompt that says the word w twice in a row ("Row,
// row, row your boat"): an answer may quote it.
//
// It is the regular expression saidTwiceRe in one pass over the prompt's
// words (runs of letters and digits) and without compiling anything: w,
// all letters and digits, is said twice in a row when two words in a row
// equal it, case folded. Any other w is asked of the expression itself.
func saidTwiceIn(prompt, w string) bool {
	if w == "" || strings.ContainsFunc(w, func(r rune) bool { return !isWordRune(r) }) {
		return saidTwiceRe(w).MatchString(prompt)
	}
	prev := false // the word before was w
	for i := 0; i < len(prompt); {
		r, n := utf8.DecodeRuneInString(prompt[i:])
		if !isWordRune(r) {
			i += n
			continue
		}
		j := i + n
		for j < len(prompt) {
			r, n := utf8.DecodeRuneInString(prompt[j:])
			if !isWordRune(r) {
				break
			}
			j += n
		}
		is := strings.EqualFold(prompt[i:j], w)
		if is && prev {
			return true
		}
		prev, i = is, j
	}
	return false
}

// saidTwiceRe is what saidTwiceIn asks of a prompt.
func saidTwiceRe(w string) *regexp.Regexp {
	q := regexp.QuoteMeta(w)
	return regexp.MustCompile(`(?i)(?:^|[^\p{L}\p{N}])` + q + `[^\p{L}\p{N}]+` + q + `(?:$|[^\p{L}\p{N}])`)
}

// isWordRune is \p{L} or \p{N}: a letter or a digit of any script.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// doubledWords counts a word said twice in a row ("of of", "both, both,").
func doubledWords(toks []string, prompt string) int {
	n := 0
	p := strings.ToLower(prompt)
	for i := 1; i < len(toks); i++ {
		a := strings.ToLower(strings.TrimFunc(toks[i-1], unicode.IsPunct))
		b := strings.ToLower(strings.TrimFunc(toks[i], unicode.IsPunct))
		if a != "" && a == b && strings.ContainsFunc(a, unicode.IsLetter) && !allowedDoubles[a] && !saidTwiceIn(p, a) {
			n++
		}
	}
	return n
}
