package classify

import (
	"fmt"
	"strings"
	"unicode"
)

// The detectors of this file find short garbage that no count reaches: a
// handful of pieces, each of which fluent text may hold, with no sentence
// between them.

// codeCue finds a prompt that asks for code: identifiers and operators are
// then its words.
var codeCue = newCue(`(?i)code|python|javascript|function|program|script|regex|sql|json|yaml|bash|shell|command|snippet|class|variable|syntax|代码|程序|コード|код|программ`)

// fragmentSoup finds a few fragments of several scripts, code tokens and
// stray marks, with few sentences or none ("Hi ] доб; __init 的 ok?? ¿
// ±] than."): four tokens or more, most of them outside sentences (see
// hasSentence), and 3 points of pieces: kinds of lone marks (1 each, up to 3), closing brackets
// that nothing opened (1 each, up to 2), three scripts or more (2) or two
// that fluent text does not mix (1), code tokens in prose (1 each, up to
// 2); marks and code tokens do not count for a prompt that asks for code.
// Lists, tables, formulas and short answers have sentences, or lone marks
// of one kind (a separator), or one script.
func fragmentSoup(t string, c textContext) string {
	prose := proseOf(t)
	toks := strings.Fields(prose)
	if len(toks) < 4 || len(toks) > 40 || hasSentence(toks) {
		return ""
	}
	score := 0
	var why []string
	add := func(n, limit int, what string) {
		if n = min(n, limit); n > 0 {
			score += n
			why = append(why, what)
		}
	}
	stray := map[string]bool{}
	code := 0
	for _, tk := range toks {
		if strayMark(tk) {
			stray[tk] = true
		}
		if codeToken(tk) {
			code++
		}
	}
	// Code is made of marks and identifiers: for a prompt that asks for
	// it, only scripts and brackets count.
	asksCode := codeCue.MatchString(c.prompt)
	if !asksCode {
		add(len(stray), 3, "lone marks")
		add(code, 2, "code tokens")
	}
	add(unopened(prose), 2, "brackets closed that nothing opened")
	if !languageCueRe.MatchString(c.prompt) {
		switch n, mixable := scriptsOf(prose); {
		case n >= 3:
			add(2, 2, fmt.Sprintf("%d scripts", n))
		case n == 2 && !mixable:
			add(1, 1, "2 scripts")
		}
	}
	if score >= 3 {
		return fmt.Sprintf("fragments, not sentences (%s): %q", strings.Join(why, ", "), clipRunes(prose, 40))
	}
	return ""
}

// hasSentence reports text that is mostly sentences: half its tokens (three
// at least) in runs of three words or more in one script or in clauses of
// three Han, kana, Hangul or Thai letters, or one clause of six such
// letters.
func hasSentence(toks []string) bool {
	in, run, script := 0, 0, ""
	for _, tk := range toks {
		unspaced := 0
		for _, r := range tk {
			if s := scriptOf(r); isCJK(s) || s == "Thai" {
				unspaced++
			}
		}
		if unspaced >= 6 {
			return true
		}
		if unspaced >= 3 {
			in++
			run, script = 0, ""
			continue
		}
		core := strings.TrimFunc(tk, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) })
		s := ""
		if r := []rune(core); len(r) > 0 && (wordTokRe.MatchString(core) || identTokRe.MatchString(core)) {
			s = scriptOf(r[0])
		}
		switch {
		case s == "":
			run = 0
		case s == script:
			run++
		default:
			run, script = 1, s
		}
		switch {
		case run == 3:
			in += 3
		case run > 3:
			in++
		}
		if s != "" && strings.IndexAny(tk, ".!?。！？") > 0 {
			// A full stop ends a sentence: the next word starts another.
			run = 0
		}
	}
	return in >= 3 && in*2 >= len(toks)
}

// strayMark reports a token of marks alone that fluent text does not
// write apart: not an operator, a bullet, a dash, an ellipsis, a table's
// rule, a pair of brackets or quotes, an emoticon or an emoji.
func strayMark(tk string) bool {
	// A number of any form is no mark: "①" numbers an exam's options.
	if strings.ContainsFunc(tk, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || isEmoji(r) }) {
		return false
	}
	if operatorTokens[tk] || strings.Trim(tk, "|-:+=") == "" || strings.Trim(tk, ".…·•*-–—_~=#/") == "" {
		return false
	}
	switch tk {
	case "()", "[]", "{}", "（）", "「」", `""`, "''", ":)", ":(", ";)", ":-)", ":-(", "^^", "^_^", "&", "%", "@", "/", "\\":
		return false
	}
	return true
}

// codeToken reports a token that is code in prose: a dunder or a leading
// underscore (__init, _x), a call (f(), x.y()), a path of identifiers
// (self.x, os.path), a scope (std::vec), an arrow or assignment glued in.
func codeToken(tk string) bool {
	return codeTokenRe.MatchString(strings.TrimRight(tk, ".,;:!?"))
}

var codeTokenRe = lazyRE(`^_{1,2}[A-Za-z]\w*|^[A-Za-z_]\w*\(\)?$|^[A-Za-z_]\w*\(|^[a-z_]\w*\.[a-z_]\w*(?:\(\))?$|::|->|=>|^\w+=\w*$|^[{}]$|\$\{`)

// brackets pairs each closing bracket with its opening one.
var brackets = map[rune]rune{')': '(', ']': '[', '}': '{', '）': '（', '】': '【', '」': '「', '』': '『', '》': '《', '〕': '〔'}

// unopened counts closing brackets that nothing opened, except a list's
// "1)" and "a)" and an emoticon's ":)".
func unopened(t string) int {
	open := map[rune]int{}
	n := 0
	rs := []rune(t)
	for i, r := range rs {
		if o, ok := brackets[r]; ok {
			switch {
			case open[o] > 0:
				open[o]--
			case i > 0 && strings.ContainsRune(":;=^", rs[i-1]):
			case (i == 1 || i >= 2 && unicode.IsSpace(rs[i-2])) && (unicode.IsLetter(rs[i-1]) || unicode.IsDigit(rs[i-1])):
			case i >= 2 && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i-2]):
			default:
				n++
			}
			continue
		}
		for _, o := range brackets {
			if r == o {
				open[o]++
			}
		}
	}
	return n
}

// scriptsOf counts the scripts of t's letters (Han and kana as one), and
// whether two of them mix in fluent text: Latin terms in Chinese, Japanese
// or Korean, and Japanese kanji and kana.
func scriptsOf(t string) (int, bool) {
	seen := map[string]bool{}
	for _, r := range t {
		if s := scriptOf(r); s != "" && unicode.IsLetter(r) {
			seen[s] = true
		}
	}
	mixable := len(seen) == 2 && seen["Latin"] && (seen["Han"] || seen["Hangul"])
	return len(seen), mixable
}

// loneMarkLine is a line of sentence punctuation alone: ".", ",", "。", "?!".
var loneMarkLine = lazyRE(`^[.,;:!?。，、；：！？¿¡،؛؟।]{1,2}$`)

// punctuationCue finds a prompt that asks about punctuation marks.
var punctuationCue = newCue(`(?i)punctuation|comma|period|full stop|標点|标点|句読点|знак`)

// wordCue finds a prompt that asks for words one by one.
var wordCue = newCue(`(?i)\bwords?\b|vocabulary|单词|词语|単語|слов`)

// fragmentLines finds text broken into lines of a word or two and lone
// punctuation ("The\n.\n\nsun the\n\n.\n,"): four lines or more, four in
// five of them three words long at most, and either two or more lines of
// a lone mark with a third of the lines such fragments, or (unasked for
// words) half the lines function words alone. A list of one word a line
// has neither, a poem no line of a lone mark.
func fragmentLines(t string, c textContext) string {
	var ls []string
	for _, l := range strings.Split(proseOf(t), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	if len(ls) < 4 {
		return ""
	}
	short, lone, function := 0, 0, 0
	for _, l := range ls {
		words := strings.Fields(l)
		switch {
		case loneMarkLine.MatchString(l):
			short++
			lone++
		case len(words) <= 3:
			short++
			if allFunctionWords(words) {
				function++
			}
		}
	}
	if short*5 < len(ls)*4 {
		return ""
	}
	switch {
	case lone >= 2 && (lone+function)*3 >= len(ls) && !punctuationCue.MatchString(c.prompt):
		return fmt.Sprintf("lines of a word or two and lone punctuation (%d of %d lines a lone mark)", lone, len(ls))
	case lone+function >= 3 && function*2 >= len(ls) && !wordCue.MatchString(c.prompt):
		return fmt.Sprintf("lines of a word or two (%d of %d lines a lone function word)", function, len(ls))
	}
	return ""
}

// shortFunctionWords are function words of other languages than English
// that stand alone on a line only in fragments.
var shortFunctionWords = map[string]bool{"的": true, "了": true, "是": true, "和": true, "在": true, "の": true, "は": true, "が": true,
	"を": true, "に": true, "と": true, "и": true, "в": true, "на": true, "не": true, "что": true, "و": true, "في": true, "من": true}

func allFunctionWords(words []string) bool {
	for _, w := range words {
		core := strings.ToLower(strings.TrimFunc(w, unicode.IsPunct))
		if core == "" || !isFunctionWord(core) && !shortFunctionWords[core] && !latinStopword(core) {
			return false
		}
	}
	return len(words) > 0
}

// latinStopword reports a function word of a Latin-script language other
// than English (le, der, el, di), not the prompt verbs the lists also hold.
func latinStopword(w string) bool {
	if len([]rune(w)) > 4 {
		return false
	}
	for _, set := range stopwordSets {
		if set[w] {
			return true
		}
	}
	return false
}

// listMarkerRe is the marker that starts a list or outline item, a
// heading or a quote: "1.", "2)", "a.", "iv.", "三、", "③", "(4)", "-",
// "*", "•", "#", ">", "- ☐" (proseOf's task box), "Step 2:", "第三步：".
var listMarkerRe = lazyRE(`^(?:[-*+•·▪◦●○■□►▶✓✔☐☑>]|#{1,6}|\d{1,3}[.)、．:：]|\(\d{1,3}\)|（\d{1,3}）|[A-Za-z][.)]|[ivxIVX]{1,5}[.)]` +
	`|[一二三四五六七八九十]{1,3}[、.．]|[\x{2460}-\x{2473}\x{2776}-\x{277F}]|[-*+] ☐` +
	`|(?i:step|item|point|question|part|schritt|paso|étape|шаг)\s*\d{1,3}\s*[:.)]|第[一二三四五六七八九十\d]{1,3}[步条点章节部分]?[：:、.]?)(?:\s+|$)`)

// structureCue finds a prompt that asks for an empty form, a numbering or
// a count: then bare markers are the answer.
var structureCue = newCue(`(?i)template|\bblank|\bempty\b|placeholder|\bforms?\b|\boutline|skeleton|\bfill|\bcount(?:ing)?\b|\bnumbers\b|numbering|\bdigits\b|\bsequence\b|空白|模板|テンプレ|шаблон|считай|посчитай`)

// emptyStructure finds an enumeration, bullet list or table whose items
// are empty ("1.\n2.\n3.\n…", "-\n-\n-", "- .", "| | |"): three empty
// items or more, more than the filled ones, or, in a reply cut off at
// max_tokens, the last three. A marker whose item follows on the next
// line is not empty.
func emptyStructure(t string, c textContext) string {
	if structureCue.MatchString(c.prompt) {
		return ""
	}
	var ls []string
	for _, l := range strings.Split(proseOf(t), "\n") {
		// A full-width numbering ("１．", "Ａ．") is a numbering.
		if l = strings.TrimSpace(foldFullWidth(l)); l != "" {
			ls = append(ls, l)
		}
	}
	var items []bool // true: empty
	for i, l := range ls {
		if tableRow(l) {
			if cells := strings.Trim(l, "| \t"); strings.Trim(cells, "| \t:-") != "" {
				items = append(items, false)
			} else if !strings.Contains(cells, "-") {
				items = append(items, true)
			}
			continue
		}
		if n := markersOnly(l); n >= 3 {
			for range n {
				items = append(items, true)
			}
			continue
		}
		m := listMarkerRe.FindString(l)
		if m == "" {
			continue
		}
		empty := !strings.ContainsFunc(l[len(m):], func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || isEmoji(r) })
		// An item may follow its marker on the next line.
		next := i+1 < len(ls) && listMarkerRe.FindString(ls[i+1]) == "" && !tableRow(ls[i+1])
		items = append(items, empty && !next)
	}
	empty := 0
	for _, e := range items {
		if e {
			empty++
		}
	}
	n := len(items)
	tail := n >= 3 && items[n-1] && items[n-2] && items[n-3]
	if empty >= 3 && (empty*2 > n || c.truncated && tail) {
		return fmt.Sprintf("a list or table of empty items (%d of %d)", empty, n)
	}
	return ""
}

func tableRow(l string) bool {
	return strings.HasPrefix(l, "|") && strings.HasSuffix(l, "|") && len(l) >= 2
}

// markersOnly counts the markers of a line made of nothing else ("1. 2. 3.
// 4."), or 0; one mark said again ("* * *", "- - -") is a rule.
func markersOnly(l string) int {
	f := strings.Fields(l)
	for _, w := range f {
		if m := listMarkerRe.FindString(w); m != w {
			return 0
		}
	}
	if len(f) > 0 && strings.Count(l, f[0]) == len(f) {
		return 0
	}
	return len(f)
}
