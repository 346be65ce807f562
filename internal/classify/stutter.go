package classify

import (
	"fmt"
	"strings"
	"unicode"
)

// stutter finds sub-words said three times inside a word ("balloonoonoon",
// "hapapapy"): a corrupt KV cache. A word that is all one syllable
// ("hahaha") and laughter are not counted.
func stutter(t string, _ textContext) string {
	var found []string
	for _, w := range strings.Fields(t) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) })
		if stutters(w) {
			found = append(found, w)
		}
	}
	if len(found) >= 2 || len(found) == 1 && len(strings.Fields(t)) <= 16 {
		return fmt.Sprintf("sub-words repeated inside words (%s)", strings.Join(found, ", "))
	}
	return ""
}

func stutters(w string) bool {
	r := []rune(strings.ToLower(w))
	if len(r) < 6 || !isLatinWord(r) {
		return false
	}
	for size := 2; size <= 4; size++ {
		for start := 0; start+size*3 <= len(r); start++ {
			unit := string(r[start : start+size])
			if strings.Trim(unit, "haeiou") == "" || unit == "la" || unit == "na" {
				continue
			}
			reps := 1
			for next := start + size; next+size <= len(r) && string(r[next:next+size]) == unit; next += size {
				reps++
			}
			rest := string(r[start+reps*size:])
			whole := start == 0 && strings.HasPrefix(unit, rest)
			if reps >= 3 && !whole {
				return true
			}
		}
	}
	return false
}

func isLatinWord(r []rune) bool {
	for _, c := range r {
		if !unicode.Is(unicode.Latin, c) {
			return false
		}
	}
	return true
}

// wordStutter finds text that says its pieces twice: a word doubled ("into
// into", "42 42", "ofof"), a word begun and begun again ("trans
// translates"), a word whose ending is doubled ("sourcece", "runsns",
// "компиляторор"), a
// Chinese or Japanese character doubled where the language does not
// reduplicate ("编译器器"). Fluent text has one such piece now and then
// (had had, murderer, 妈妈); a broken KV cache or a sampler that emits each
// token twice has them everywhere: three or more, at least one word in
// ten (two in a reply of twelve words or fewer).
func wordStutter(t string, c textContext) string {
	prose := proseOf(t)
	toks := strings.Fields(prose)
	events, words := stutterEvents(toks, c)
	han, hanDoubles := hanStutter(prose)
	events = append(events, hanDoubles...)
	words += han / 2
	n := len(events)
	if n >= 3 && n*10 >= words || n >= 2 && words <= 12 {
		return fmt.Sprintf("stutter: %d pieces said twice in %d words (%s)", n, words, clipRunes(strings.Join(events, ", "), 80))
	}
	return ""
}

// stutterEvents lists the doubled words, false starts and doubled endings
// among toks, and counts the words.
func stutterEvents(toks []string, c textContext) (events []string, words int) {
	prompt := c.prompt
	core := make([]string, len(toks))
	for i, tk := range toks {
		core[i] = strings.ToLower(strings.TrimFunc(tk, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
	}
	numeric := func(i int) bool {
		return i >= 0 && i < len(core) && core[i] != "" && !strings.ContainsFunc(core[i], unicode.IsLetter)
	}
	asked := c.repeats
	for i, w := range core {
		if w == "" {
			continue
		}
		words++
		if i > 0 && w == core[i-1] && !asked {
			if i+1 < len(core) && core[i+1] == w || i >= 2 && core[i-2] == w || endsSentence(toks[i-1]) {
				continue // a chant ("la la la") or a new sentence ("with it. It was"), not a stutter
			}
			letters := strings.ContainsFunc(w, unicode.IsLetter)
			// A number said twice in prose ("is 37 37,"), not in a list
			// of numbers ("1 1 2 3 5").
			if letters && !allowedDoubles[w] && !grammarDoubles[w] && !saidTwiceIn(prompt, w) ||
				!letters && !numeric(i-2) && !numeric(i+1) {
				events = append(events, toks[i-1]+" "+toks[i])
			}
			continue
		}
		if i > 0 && falseStart(core[i-1], w) {
			events = append(events, toks[i-1]+" "+toks[i])
		}
		if doubledEnding(w) || doubledWhole(w) {
			events = append(events, toks[i])
		}
	}
	return events, words
}

// endsSentence reports a token that closes a sentence or clause.
func endsSentence(tk string) bool {
	return strings.ContainsAny(lastRune(tk), ".!?;:。！？；：")
}

func lastRune(s string) string {
	r := []rune(s)
	if len(r) == 0 {
		return ""
	}
	return string(r[len(r)-1])
}

// grammarDoubles are words other languages say twice by their grammar:
// German relative pronouns after an article ("die Frau, die die Tür
// öffnete"), French reflexives ("nous nous levons").
var grammarDoubles = map[string]bool{"die": true, "das": true, "der": true, "den": true, "dem": true, "nous": true, "vous": true, "dat": true}

// falseStart reports a word begun and then said whole: "trans translates",
// "mach machine"; three letters at least, not a function word ("for
// fortune", "in into").
func falseStart(a, b string) bool {
	ra := []rune(a)
	return len(ra) >= 3 && len([]rune(b)) >= len(ra)+2 && strings.HasPrefix(b, a) &&
		!isFunctionWord(a) && isLetters(ra)
}

func isLetters(r []rune) bool {
	for _, c := range r {
		if !unicode.IsLetter(c) {
			return false
		}
	}
	return len(r) > 0
}

// legitEndings are doubled endings that languages write: murderer and
// schwerer, denen and verschiedenen, theses and dieses, crisis, makanan,
// banana, querer.
var legitEndings = map[string]bool{"er": true, "en": true, "es": true, "is": true, "an": true, "na": true}

// doubledEnding reports a word of six letters or more in a spaced script
// whose last two or three letters are said twice ("sourcece", "runsns",
// "переводитит"), on a stem of two letters or more, unless the ending is
// one that languages write (legitEndings).
func doubledEnding(w string) bool {
	r := []rune(w)
	if len(r) < 6 || !isLetters(r) || isCJK(scriptOf(r[0])) || unicode.Is(unicode.Thai, r[0]) {
		return false
	}
	for size := 2; size <= 3; size++ {
		n := len(r)
		if n-2*size < 2 {
			continue
		}
		unit := string(r[n-size:])
		if unit == string(r[n-2*size:n-size]) && !legitEndings[unit] && !allOneRune(unit) {
			return true
		}
	}
	return false
}

// doubledWhole reports a word said twice without a space ("ofof",
// "capitalcapital"), each half two letters or more.
func doubledWhole(w string) bool {
	r := []rune(w)
	h := len(r) / 2
	return len(r)%2 == 0 && h >= 2 && isLetters(r) && string(r[:h]) == string(r[h:]) && !allOneRune(string(r[:h]))
}

func allOneRune(s string) bool {
	r := []rune(s)
	for _, c := range r {
		if c != r[0] {
			return false
		}
	}
	return true
}

// reduplicated are Chinese characters the language doubles on purpose, in
// words of their own: kinship terms (妈妈, 哥哥), verbs said twice to
// soften them (看看, 试试), adverbs (慢慢, 常常, 默默), measure words and
// nouns that mean "every" (天天, 人人, 个个), sounds (哈哈, 叽叽).
const reduplicated = "妈爸哥姐弟妹爷奶姥姑伯叔舅姨婆公宝娃星猩蝈看想试听说走聊谈问找等坐玩学练尝摸逛歇笑动转洗读写算查比猜数帮抱亲拍擦晒散跳跑吃喝讲做弄" +
	"慢常刚渐偷悄轻静早久快好高大小多少默紧深微纷往仅偏白足整稍暗隐缓徐淡浅满团滚悠漫茫苍萧飘闪亮" +
	"天人家户年月日处个每样件条种句声步层重时代世子孙方片般些点颗" +
	"谢拜嘻哈呵嘿哦嗯啊啦乎叽喳咕嘟呼咚当叮嗡嘀哗"

// hanStutter counts Han letters and the Han characters said exactly twice
// that Chinese does not reduplicate: not in reduplicated, not before
// 的, 地 or 得 (红红的, 绿油油的), not a pair next to a pair (高高兴兴).
func hanStutter(t string) (han int, doubles []string) {
	r := []rune(t)
	at := func(i int) rune {
		if i < 0 || i >= len(r) {
			return 0
		}
		return r[i]
	}
	pair := func(i int) bool { return at(i) != 0 && at(i) == at(i+1) && unicode.Is(unicode.Han, at(i)) }
	for i, c := range r {
		if !unicode.Is(unicode.Han, c) {
			continue
		}
		han++
		if !pair(i-1) || at(i-2) == c || at(i+1) == c || strings.ContainsRune(reduplicated, c) ||
			strings.ContainsRune("的地得", at(i+1)) || pair(i+1) || pair(i-3) {
			continue
		}
		doubles = append(doubles, string([]rune{c, c}))
	}
	return han, doubles
}
