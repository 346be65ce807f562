package classify

import (
	"strings"
	"unicode"
)

// markupTagRe is an HTML or XML tag: <li>, </td>, <br/>, <a href="x">.
var markupTagRe = lazyRE(`<(/?)([A-Za-z][A-Za-z0-9:-]*)(?:\s+[^<>]*?)?\s*(/?)>`)

// inlineTags are HTML's inline elements: they mark words up within a
// line; every other element starts a line of its own (a paragraph, a
// row).
var inlineTags = map[string]bool{}

// itemTags are the elements that hold one item of a list: each starts a
// line as a Markdown list item does ("- "), so the detectors see a list
// (an empty <li></li> is an empty item) and not lines of a word or two.
var itemTags = map[string]bool{"li": true, "dt": true, "dd": true, "option": true}

// cellTags are a table's cells: each is fenced by pipes as a Markdown
// table's cell is, so a row of them is a table row ("| a || b |").
var cellTags = map[string]bool{"td": true, "th": true}

func init() {
	for _, t := range strings.Fields("a abbr b bdi bdo cite code data dfn del em font i ins kbd mark q s samp small span strong sub sup time u var") {
		inlineTags[t] = true
	}
}

// blankRe is a pair of round brackets around spaces alone, of either
// width: an exam's blank to fill in ("（　　）", "(    )").
var blankRe = lazyRE(`([(（])[ \t\x{3000}]+([)）])`)

// unmarked is t with its markup taken out, for the detectors that read
// words, and with an exam's blanks closed up ("（　　）" is "（）": one
// blank, one token). Markup repeats its tags by design (<li>…</li> for
// every item, <tr><td> for every row), and a tag glued to a word
// ("<td>北京</td>") is no word of two scripts. A comment's delimiters
// (<!-- -->) break lines. A tag counts as markup when its element is
// closed somewhere in t (</li>) or closes itself (<br/>), so a formula's
// "a<b and c>d" stays; an inline element becomes a space, an item's
// opening tag a list marker on a new line, a cell's tags pipes, any other
// tag a line break. Special tokens (<s>, <eos>) are looked for before, in
// the text as it came. When nothing but markup is left, t is judged as it
// came: a loop of tags is a loop.
func unmarked(t string) string {
	t = blankRe.ReplaceAllString(t, "$1$2")
	if !strings.Contains(t, "</") && !strings.Contains(t, "/>") && !strings.Contains(t, "<!--") {
		return t
	}
	t = strings.NewReplacer("<!--", "\n", "-->", "\n").Replace(t)
	closed := map[string]bool{}
	for _, m := range markupTagRe.get().FindAllStringSubmatch(t, -1) {
		if m[1] == "/" || m[3] == "/" {
			closed[strings.ToLower(m[2])] = true
		}
	}
	if len(closed) == 0 {
		return t
	}
	out := markupTagRe.get().ReplaceAllStringFunc(t, func(tag string) string {
		m := markupTagRe.get().FindStringSubmatch(tag)
		name := strings.ToLower(m[2])
		switch {
		case !closed[name]:
			return tag
		case inlineTags[name]:
			return " "
		case itemTags[name] && m[1] == "" && m[3] == "":
			return "\n- "
		case cellTags[name] && m[1] == "":
			return "| "
		case cellTags[name]:
			return " |"
		}
		return "\n"
	})
	if !strings.ContainsFunc(out, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return t
	}
	return out
}

// undecorated is t without the rules and banners that decorate its other
// lines ("# ==========", "//////////", "/*********/", "-- ------",
// ";;;;;;;;", "━━━━ 第一章 ━━━━"): a token of marks alone with a run of
// three or more of one mark, on a line that begins with a token of marks
// alone (a comment lead, or the rule itself). A rule decorates text, it is
// not the text: t needs two lines with letters, or it is judged as it
// came. Marks that end sentences ("!", "?", commas and full stops of
// every width) draw no rules: a line of "!!!!!!" is NaN logits.
func undecorated(t string) string {
	if !hasOtherLines(t) {
		return t
	}
	ls := strings.Split(t, "\n")
	changed := false
	for i, l := range ls {
		f := strings.Fields(l)
		if len(f) == 0 || strings.ContainsFunc(f[0], isWordRune) {
			continue
		}
		kept := f[:0:0]
		for _, tok := range f {
			if ruleToken(tok) {
				changed = true
				continue
			}
			kept = append(kept, tok)
		}
		ls[i] = strings.Join(kept, " ")
	}
	if !changed {
		return t
	}
	return strings.Join(ls, "\n")
}

// ruleToken reports a token of marks alone with a run of three or more of
// one mark that can draw a rule.
func ruleToken(tok string) bool {
	if strings.ContainsFunc(tok, isWordRune) {
		return false
	}
	run, prev := 0, rune(0)
	for _, r := range tok {
		if r == prev {
			run++
		} else {
			run, prev = 1, r
		}
		if run >= 3 && rulesWith(r) {
			return true
		}
	}
	return false
}

// rulesWith reports a mark that draws rules: any but those that end
// sentences, the replacement character, and the backquote and tilde that
// fence Markdown code ("```" opens a block, it decorates nothing).
func rulesWith(r rune) bool {
	switch foldRune(r) {
	case '!', '?', ',', '、', '。', '，', '\uFFFD', '`', '~':
		return false
	}
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

// itemSeparator reports a token that separates the items of a structure:
// a table's pipes ("|", "||", "｜"), or a list marker that starts a line.
func itemSeparator(tok string, startsLine bool) bool {
	if tok != "" && strings.Trim(tok, "|｜") == "" {
		return true
	}
	return startsLine && listMarkerRe.MatchString(tok)
}

// fieldsOf splits t at white space, as strings.Fields does, and marks the
// tokens that separate items (itemSeparator).
func fieldsOf(t string) (toks []string, sep []bool) {
	for _, l := range strings.Split(t, "\n") {
		for i, tok := range strings.Fields(l) {
			toks = append(toks, tok)
			sep = append(sep, itemSeparator(tok, i == 0))
		}
	}
	return toks, sep
}

// itemLoop finds the same item of a list, or the same row of a table,
// four times in a row or more (eight for an item with no letter): cells
// and items repeat one another's words by design, a list of one item over
// and over is a loop.
func itemLoop(t string) (string, int) {
	var items []string
	for _, l := range strings.Split(t, "\n") {
		l = strings.TrimSpace(l)
		switch m := listMarkerRe.FindString(l); {
		case l == "":
		case tableRow(l) && strings.Trim(l, "|｜ \t:-") != "":
			items = append(items, strings.Join(strings.Fields(strings.ToLower(l)), " "))
		case m != "" && strings.TrimSpace(l[len(m):]) != "":
			items = append(items, strings.Join(strings.Fields(strings.ToLower(l[len(m):])), " "))
		default:
			items = append(items, "") // a line that is no item breaks a run
		}
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j] == items[i] {
			j++
		}
		n := j - i
		if items[i] != "" && (n >= 4 && strings.ContainsFunc(items[i], unicode.IsLetter) || n >= 8) {
			return items[i], n
		}
		i = j
	}
	return "", 0
}
