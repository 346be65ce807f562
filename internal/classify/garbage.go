package classify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Garbled reports whether text is not language, and how it fails, judging
// the text alone (no prompt, not known to be cut off).
func Garbled(text string) (bool, string) { return garbled(text, textContext{}) }

// textContext is what a detector may know besides the text: the prompt (a
// repetition the prompt asked for is not a loop) and whether max_tokens cut
// the text off (a run of marks that fills the tail is the model stuck).
type textContext struct {
	prompt    string
	truncated bool
	// ended says the reply ended by itself (finish reason "stop"): a
	// burst of "!" at its end was written, not a sampler stuck on token 0.
	ended bool
	// loopsAllowed skips the sentence-loop sign, to ask whether it is the
	// only one.
	loopsAllowed bool
	// repeats says the prompt asks for repeated text (asksRepetition), and
	// promptWords are then its words (see askedWords); garbled sets both
	// once for every detector.
	repeats     bool
	promptWords map[string]bool
}

// maxJudged bounds the runes the quadratic detectors look at: a reply is
// bounded by max_tokens, but a recorded case may hold anything.
const maxJudged = 8000

// garbled runs the detectors, strongest first. Each looks at shape, never at
// meaning, and most work in any language. Special tokens are looked for in
// the text as it came; the rest read it without markup and without the
// rules and banners that decorate it (unmarked, undecorated), as tags and
// rules repeat by design:
//   - single strong signs: special-token text, replacement characters, a run
//     of one character (marks, digits or letters), output with no letters or
//     digits, digit/mark noise, a descending or wrapping character sequence,
//     words that switch script mid-word, a loop of words or of characters,
//     a sub-word stutter inside words, pieces said twice (doubled words,
//     false starts, doubled endings), a sentence said over and over;
//   - short garbage no count reaches: fragment soup, lines of a word or two
//     and lone marks, lists and tables of empty items;
//   - subword soup: English prose in which many words are no English
//     spelling (see nonwordSalad);
//   - ratios, measured on the whole text and on its tail (a fluent start
//     must not hide a collapse): function-word soup, repeated 4-grams,
//     malformed tokens, stray punctuation fragments;
//   - weak signs summed (a short salad stays under every single count):
//     one replacement character, one mixed-script word, words glued to
//     digit runs, glued sub-word pieces, doubled words, articles and
//     prepositions left dangling before punctuation, inline headings.
func garbled(text string, c textContext) (bool, string) {
	t := strings.TrimSpace(text)
	if t == "" {
		return false, ""
	}
	if r := []rune(t); len(r) > maxJudged {
		t = string(r[len(r)-maxJudged:])
	}
	if c.repeats = asksRepetition(c.prompt); c.repeats {
		c.promptWords = promptWords(c.prompt)
	}
	if why := specialTokens(t, c); why != "" {
		return true, why
	}
	// Markup repeats its tags by design, and a banner its marks: the rest
	// reads the words.
	t = strings.TrimSpace(undecorated(unmarked(t)))
	for _, d := range []func(string, textContext) string{
		bpeMarkers, replacementChars, charRuns, noLetters, digitMarkNoise, monotoneRun,
		scriptSalad, loops, stutter, wordStutter, sentenceLoop, unspacedCollapse,
		fragmentSoup, fragmentLines, emptyStructure,
	} {
		if why := d(t, c); why != "" {
			return true, why
		}
	}
	// The ratios and weak signs read prose: code blocks and JSON are not.
	prose := proseOf(t)
	if prose == "" {
		return false, ""
	}
	toks := tokens(prose)
	if why := strayNumbers(toks); why != "" {
		return true, why
	}
	if why := nonwordSalad(prose, toks, c); why != "" {
		return true, why
	}
	for _, w := range windows(toks) {
		if why := ratios(w.toks, prose, c); why != "" {
			return true, w.name + why
		}
	}
	if why := weakSigns(prose, toks, c); why != "" {
		return true, why
	}
	return false, ""
}

var (
	fenceRe = lazyRE("(?s)```.*?(?:```|$)")
	// mathRe is LaTeX math: $...$, $$...$$, \(...\), \[...\].
	mathRe = lazyRE(`(?s)\$\$.+?\$\$|\$[^$\n]+\$|\\\(.+?\\\)|\\\[.+?\\\]`)
)

// checkboxRe is a markdown task list's box ("- [ ]", "* [x]").
var checkboxRe = lazyRE(`(?m)^(\s*[-*+]\s+)\[[ xX]\]`)

// proseOf is the text without fenced code blocks, inline code and LaTeX
// math (each math span stands as one word), with a task list's boxes as
// one mark (☐), or "" when the whole text is a JSON value.
func proseOf(t string) string {
	if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return ""
	}
	t = fenceRe.ReplaceAllString(t, "\n")
	t = checkboxRe.ReplaceAllString(t, "$1☐")
	t = mathRe.ReplaceAllString(t, " x ")
	return strings.TrimSpace(codeSpanRe.ReplaceAllString(t, " "))
}

// bpeMarkers finds the tokenizer's own space and newline marks in the text
// ("ĠtheĠcat", "▁the▁cat", "Ċ"): the detokenizer did not run, or token ids
// are wrong.
func bpeMarkers(t string, _ textContext) string {
	n := strings.Count(t, "Ġ") + strings.Count(t, "▁") + strings.Count(t, "Ċ")
	if n >= 3 && n*20 >= len([]rune(t)) {
		return fmt.Sprintf("%d tokenizer space marks (Ġ, ▁, Ċ) in the text: raw token pieces, not text", n)
	}
	return ""
}

func replacementChars(t string, _ textContext) string {
	if n := strings.Count(t, "\uFFFD"); n >= 2 {
		return fmt.Sprintf("%d replacement characters (invalid UTF-8 from broken token ids)", n)
	}
	return ""
}

// bannerRunes draw markdown rules, C++ banners, ellipses and an exam's
// dotted blanks ("…………"): long runs of them are ordinary.
const bannerRunes = "-=_*#~.`/…⋯"

// charRuns finds a run of one non-space character: 5 "!" (token 0 of most
// vocabularies, the argmax of NaN logits), 6 of another mark (40 of a
// banner rune), 12 of one letter or digit (16 zeros); and, in a reply cut off
// by max_tokens, 3 of one mark (4 dots) filling the tail. A full-width mark
// counts as its ASCII form ("！" as "!", "＿" as "_"). Not counted: a burst
// of "!" or "?" that ends a sentence of fluent text (see emphasis), a run of
// underscores that more text follows or that ends a reply that ended by
// itself (a blank to fill in); rules and banners are gone before (see
// undecorated).
func charRuns(t string, c textContext) string {
	rs := []rune(t)
	asked := askedRunes(c.prompt)
	for i := 0; i < len(rs); {
		j := i + 1
		for j < len(rs) && rs[j] == rs[i] {
			j++
		}
		r, n := rs[i], j-i
		f := foldRune(r)
		limit := 0
		switch {
		case unicode.IsSpace(r):
		case f == '!':
			limit = 5
		case strings.ContainsRune(bannerRunes, f):
			limit = 40
		case unicode.IsPunct(r) || unicode.IsSymbol(r):
			limit = 6
		case unicode.IsLetter(r):
			limit = 12
		case r == '0':
			limit = 16 // a trillion has twelve zeros
		case unicode.IsDigit(r):
			limit = 12
		}
		switch {
		case limit == 0 || n < limit:
		case emphasisMark(r) && emphasis(rs, i, j, c):
			limit = 0
		case f == '_' && (c.ended || slices.ContainsFunc(rs[j:], isWordRune)):
			limit = 0 // a blank to fill in ("Signature: ____…"), however long
		}
		if limit > 0 && n >= limit && !strings.ContainsRune(asked, r) {
			why := fmt.Sprintf("a run of %d %q", n, string(r))
			if f == '!' {
				why += ": at greedy decoding this is token 0 over and over, the usual sign of NaN logits"
			}
			return why
		}
		if c.truncated && j == len(rs) && (unicode.IsPunct(r) || unicode.IsSymbol(r)) && (n >= 3 && f != '.' || n >= 4) {
			return fmt.Sprintf("the reply was cut off at max_tokens while repeating %q (%d times at the end)", string(r), n)
		}
		i = j
	}
	return ""
}

// foldRune maps a full-width form to ASCII ("！" is "!").
func foldRune(r rune) rune {
	if r >= 0xFF01 && r <= 0xFF5E {
		return r - 0xFEE0
	}
	return r
}

// foldFullWidth maps the full-width forms of s to ASCII, as foldRune,
// and leaves the ideographic space alone (foldWidth makes it a space).
func foldFullWidth(s string) string { return strings.Map(foldRune, s) }

// emphasisMark reports the marks writers say over and over to end a
// sentence with feeling: "!", "?" and their full-width forms.
func emphasisMark(r rune) bool {
	f := foldRune(r)
	return f == '!' || f == '?'
}

// maxEmphasis is the longest burst of "!" or "?" read as emphasis: NaN
// logits give token 0 until max_tokens, far more.
const maxEmphasis = 12

// emphasis reports a burst rs[i:j] of "!" or "?" that ends a sentence in
// fluent text ("What a day!!!!!! I can't", "Правда??????? Да", "太棒了！！！！！！我"):
// twelve marks at most, right after a word (after a space in French, which
// sets one before "!" and "?"), in a text of three words or more; and
// either more text follows, as no stuck sampler writes, or the reply ends
// there by itself (finish reason "stop"). A burst after a digit
// ("62!!!!!!"), after nothing, or at the end of a reply cut off at
// max_tokens or not known to have ended is not emphasis.
func emphasis(rs []rune, i, j int, c textContext) bool {
	if j-i > maxEmphasis {
		return false
	}
	k := i - 1
	for k >= 0 && emphasisMark(rs[k]) {
		k-- // "what?!!!!!!"
	}
	spaced := k >= 0 && (rs[k] == ' ' || rs[k] == '\u00A0' || rs[k] == '\u202F')
	if spaced {
		k--
	}
	if k < 0 || !unicode.IsLetter(rs[k]) && !strings.ContainsRune(closingMarks, rs[k]) && !isEmoji(rs[k]) {
		return false
	}
	more := slices.ContainsFunc(rs[j:], func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
	if !more && (c.truncated || !c.ended) {
		return false
	}
	t := string(rs)
	if spaced && languageOf(t) != "French" {
		return false
	}
	return proseWords(t) >= 3
}

// closingMarks close a word or a quote: a burst may follow them ("»!!!").
const closingMarks = ")]\"'”’»」』）】"

// proseWords counts the words of t that have letters, a Chinese or
// Japanese word as two of their letters.
func proseWords(t string) int {
	n, unspaced := 0, 0
	for _, w := range strings.Fields(t) {
		if strings.ContainsFunc(w, unicode.IsLetter) {
			n++
		}
	}
	for _, r := range t {
		if s := scriptOf(r); isCJK(s) || s == "Thai" {
			unspaced++
		}
	}
	return max(n, unspaced/2)
}

// isEmoji reports a pictograph: a reply of emoji says something.
func isEmoji(r rune) bool {
	return unicode.Is(unicode.So, r) && r >= 0x2600
}

// symbolNames are what a prompt calls the marks it asks for.
var symbolNames = []struct{ name, runes string }{
	{"asterisk", "*"}, {"star", "*"}, {"dash", "-—–"}, {"hyphen", "-"}, {"equal", "="}, {"hash", "#"},
	{"pound", "#"}, {"exclamation", "!"}, {"period", "."}, {"dot", "."}, {"underscore", "_"},
	{"plus", "+"}, {"tilde", "~"}, {"slash", "/"}, {"line", "-=_─━"}, {"separator", "-=_─━*"},
	{"divider", "-=_─━*"}, {"rule", "-=_─━*"}, {"banner", "#=*/-"}, {"border", "#=*-|+"},
	{"morse", ".-/"}, {"brainfuck", "+-<>[].,"}, {"ellipsis", "."},
}

// askedRunes are the marks the prompt asks for by name, or shows when they
// are not ASCII operators ("★"): a run of them is what was asked, not a
// stuck sampler.
func askedRunes(prompt string) string {
	if prompt == "" {
		return ""
	}
	var b strings.Builder
	p := strings.ToLower(prompt)
	for _, s := range symbolNames {
		if strings.Contains(p, s.name) {
			b.WriteString(s.runes)
		}
	}
	for _, r := range prompt {
		if (unicode.IsPunct(r) || unicode.IsSymbol(r)) && r > unicode.MaxASCII {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hasOtherLines reports two or more lines with letters: a banner decorates
// text, it is not the text.
func hasOtherLines(t string) bool {
	n := 0
	for _, l := range strings.Split(t, "\n") {
		if strings.ContainsFunc(l, unicode.IsLetter) {
			n++
		}
	}
	return n >= 2
}

func noLetters(t string, c textContext) string {
	asked := askedRunes(c.prompt)
	if !strings.ContainsFunc(t, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(asked, r) || isEmoji(r)
	}) {
		return "punctuation-only output"
	}
	return ""
}

// plainNumberRe is what a token of digits and marks looks like in prose: a
// number, a date, a time, a version, an address, a fraction, a range.
var plainNumberRe = lazyRE(`^[(\[$€£+-]?\d+(?:[.,:/x×-]\d+){0,4}[%)\].,;:!?]?$`)

var listSepRe = lazyRE(`[,、，;；]`)

// plainList reports a token that is a list of numbers ("1、2、3、4、5",
// "3,5,7,11"), unless it says one number over and over unasked.
func plainList(w string, c textContext) bool {
	parts := listSepRe.Split(strings.TrimRight(w, ",、，;；.。"), -1)
	if len(parts) < 2 {
		return false
	}
	same := true
	for _, p := range parts {
		if !plainNumberRe.MatchString(p) {
			return false
		}
		same = same && p == parts[0]
	}
	return !same || len(parts) < 6 || c.repeats
}

// digitMarkNoise finds tokens of 10 or more digits and marks with no
// letters that are not numbers or lists of numbers ("1!!1!1!!1",
// "0.,0.,3;;2"), and, outside code, runs of 8 or more marks of three kinds
// or more ("}}]);)}]}}").
func digitMarkNoise(t string, c textContext) string {
	for _, w := range strings.Fields(proseOf(t)) {
		if len([]rune(w)) >= 8 && !strings.ContainsFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			kinds := map[rune]bool{}
			for _, r := range w {
				kinds[r] = true
			}
			asked := askedRunes(c.prompt)
			if len(kinds) >= 3 && !strings.ContainsAny(w, "─━═") && strings.Trim(w, "|:-=+") != "" &&
				strings.IndexFunc(w, func(r rune) bool { return !strings.ContainsRune(asked, r) }) >= 0 {
				return fmt.Sprintf("a tangle of punctuation (%q)", clipRunes(w, 40))
			}
		}
	}
	for _, w := range strings.Fields(t) {
		if len(w) < 10 || strings.ContainsFunc(w, unicode.IsLetter) || !strings.ContainsFunc(w, unicode.IsDigit) || plainList(w, c) {
			continue
		}
		marks := 0
		for _, r := range w {
			if unicode.IsPunct(r) || unicode.IsSymbol(r) {
				marks++
			}
		}
		if marks*10 >= len([]rune(w))*3 && !plainNumberRe.MatchString(w) {
			return fmt.Sprintf("digit and punctuation noise (%q)", clipRunes(w, 40))
		}
	}
	return ""
}

// monotoneRun finds 8 or more characters that step down one code point at a
// time ("zyxwvuts", "98765432"), or a run that steps up and wraps around
// ("xyzabcdefg", "7890123456"): a sampler walking the vocabulary, unless
// the prompt asked for a countdown, an alphabet or the digits.
func monotoneRun(t string, c textContext) string {
	p := strings.ToLower(c.prompt)
	for _, cue := range []string{"alphabet", "backward", "reverse", "countdown", "count down", "digits", "letters", "sequence", "descending"} {
		if strings.Contains(p, cue) {
			return ""
		}
	}
	rs := []rune(t)
	next := func(a, b rune) int {
		switch {
		case b == a-1:
			return -1
		case b == a+1, a == 'z' && b == 'a', a == 'Z' && b == 'A', a == '9' && b == '0':
			return 1
		}
		return 0
	}
	for i := 0; i < len(rs); {
		if !unicode.IsLetter(rs[i]) && !unicode.IsDigit(rs[i]) {
			i++
			continue
		}
		dir, j, wrapped := 0, i+1, false
		for ; j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])); j++ {
			d := next(rs[j-1], rs[j])
			if d == 0 || dir != 0 && d != dir {
				break
			}
			dir = d
			wrapped = wrapped || rs[j] < rs[j-1] && d == 1
		}
		if n := j - i; n >= 8 && (dir == -1 || wrapped && n >= 10) {
			return fmt.Sprintf("the characters step through the vocabulary in order (%q)", clipRunes(string(rs[i:j]), 40))
		}
		i = max(j, i+1)
	}
	return ""
}

// scriptSalad finds words whose letters switch script. Chinese, Japanese
// and Korean write Latin terms against their own letters without a space
// (Qwen3模型, PyTorchで, GPU는), so a switch between Latin and those scripts
// counts only in text that is mostly in another script; a lone Greek letter
// in a short Latin word (Δx, μs, λmax) is notation.
func scriptSalad(t string, c textContext) string {
	words := strings.Fields(t)
	mixed, scripts := mixedScriptWords(words, cjkShare(t) >= 0.3)
	promptScripts := 0
	if c.prompt != "" {
		_, promptScripts = mixedScriptWords(strings.Fields(c.prompt), true)
	}
	if mixed >= 2 || promptScripts < 2 && (scripts >= 4 || scripts >= 3 && mixed >= 1) {
		return fmt.Sprintf("multilingual token salad: %d scripts, %d words switch script mid-word", scripts, mixed)
	}
	return ""
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

func isCJK(s string) bool { return s == "Han" || s == "Hangul" }

// cjkShare is the share of letters that are Han, kana or Hangul.
func cjkShare(t string) float64 {
	cjk, all := 0, 0
	for _, r := range t {
		if !unicode.IsLetter(r) {
			continue
		}
		all++
		if isCJK(scriptOf(r)) {
			cjk++
		}
	}
	if all == 0 {
		return 0
	}
	return float64(cjk) / float64(all)
}

// mixedScriptWords counts words whose letters come from two scripts
// ("складаระ", "userтехнологияstatement"), and how many scripts the text
// uses in all. cjkText allows Latin against CJK letters.
func mixedScriptWords(fields []string, cjkText bool) (mixed, scripts int) {
	all := map[string]bool{}
	// A hyphen joins a Latin term to a word of another script on purpose
	// ("KV-кэша", "GPU-кластере").
	var words []string
	for _, f := range fields {
		words = append(words, strings.Split(f, "-")...)
	}
	for _, w := range words {
		perScript := map[string]int{}
		switched := false
		hangulSwitches := 0
		prev := ""
		for _, r := range w {
			if !unicode.IsLetter(r) {
				continue
			}
			s := scriptOf(r)
			if s == "" {
				continue
			}
			all[s] = true
			perScript[s]++
			if prev != "" && s != prev && !(cjkText && (isCJK(s) && prev == "Latin" || isCJK(prev) && s == "Latin")) {
				switched = true
			}
			if prev != "" && s != prev && (s == "Hangul" || prev == "Hangul") {
				// A Korean particle on a Latin word is one switch; more is
				// salad ("안녕abc하세xyz요").
				if hangulSwitches++; hangulSwitches >= 2 {
					switched = true
				}
			}
			prev = s
		}
		if switched && !(len(perScript) == 2 && perScript["Greek"] == 1 && len([]rune(w)) <= 5) {
			mixed++
			if hangulSwitches >= 3 {
				mixed++ // switching back and forth: pieces, not a particle
			}
		}
	}
	return mixed, len(all)
}

// strayNumbers finds prose whose last 12 tokens turn into numbers in no
// order ("... glucosa y oxígeno. 0.7,3 4:1 0 ,8 2.2 5; 0 9."): 60% of them
// or more, after a start with a tenth or less. A list that counts up is
// an answer.
func strayNumbers(toks []string) string {
	if len(toks) < 24 {
		return ""
	}
	numeric := func(t string) bool {
		return strings.ContainsFunc(t, unicode.IsDigit) && !strings.ContainsFunc(t, unicode.IsLetter)
	}
	head, tail := toks[:len(toks)-12], toks[len(toks)-12:]
	nh, nt := 0, 0
	for _, t := range head {
		if numeric(t) {
			nh++
		}
	}
	var vals []float64
	for _, t := range tail {
		if numeric(t) {
			nt++
			if f, err := strconv.ParseFloat(strings.Trim(t, ",.;:()[]"), 64); err == nil {
				vals = append(vals, f)
			}
		}
	}
	if nt*10 < 12*6 || nh*10 > len(head) || slices.IsSorted(vals) && len(vals) == nt {
		return ""
	}
	return fmt.Sprintf("the end turns into stray numbers (%d of the last 12 tokens)", nt)
}

// unspacedCollapse finds, in Chinese, Japanese or Thai (scripts written
// without spaces between words), an end that breaks into spaces and marks:
// half of the last 40 characters or more, against a fifth of the rest or
// less. Token windows cannot see it: such text has few tokens.
func unspacedCollapse(t string, _ textContext) string {
	rs := []rune(t)
	if len(rs) < 60 {
		return ""
	}
	unspaced, letters := 0, 0
	for _, r := range rs {
		if unicode.IsLetter(r) {
			letters++
			if s := scriptOf(r); s == "Han" || s == "Thai" {
				unspaced++
			}
		}
	}
	if unspaced*2 < letters {
		return ""
	}
	breaks := func(rs []rune) float64 {
		n := 0
		for _, r := range rs {
			if unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r) || unicode.Is(unicode.Latin, r) {
				n++
			}
		}
		return float64(n) / float64(len(rs))
	}
	head, tail := breaks(rs[:len(rs)-40]), breaks(rs[len(rs)-40:])
	if tail >= 0.45 && head <= 0.2 {
		return fmt.Sprintf("the end breaks into spaces and marks (%.0f%% of the last 40 characters, %.0f%% before)", tail*100, head*100)
	}
	return ""
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
