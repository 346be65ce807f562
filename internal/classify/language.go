package classify

import (
	"strings"
	"unicode"
)

// Languages are told apart by script, and Latin-script languages by their
// commonest function words. A text too short or too mixed to tell gives "".
var stopwords = map[string][]string{
	"English":    strings.Fields("the a an of and to in is are was were it that this with for on be by as at from you your what how why which who do does describe tell write explain"),
	"French":     strings.Fields("le la les un une des du de et est sont en dans que qui pour sur avec pas ce cette il elle nous vous au aux décris écris explique"),
	"German":     strings.Fields("der die das ein eine und ist sind nicht mit für auf den dem des zu im von wie was ich sie es beschreibe erkläre schreibe"),
	"Spanish":    strings.Fields("el la los las un una y es son de del en que por para con como se su al lo describe escribe explica qué cómo"),
	"Portuguese": strings.Fields("o a os as um uma e é são de do da em que para com não se no na dos das ao descreva escreva explique"),
	"Italian":    strings.Fields("il lo la gli le un una e è sono di del della che per con non si nel alla descrivi scrivi spiega"),
	"Dutch":      strings.Fields("de het een en is zijn van in dat met voor op niet te je ik wat hoe beschrijf schrijf leg"),
	"Indonesian": strings.Fields("yang dan di ini itu dengan untuk tidak dari adalah ke pada akan saya apa bagaimana jelaskan tuliskan"),
	"Turkish":    strings.Fields("bir ve bu için ile çok ne olarak gibi daha ama mi mı değil nasıl nedir açıkla yaz"),
	"Polish":     strings.Fields("i w nie na się jest że z do to jak co czy są od po dla opisz napisz wyjaśnij"),
	"Vietnamese": strings.Fields("là của và các có không một những được trong cho với này người đã hãy gì sao"),
}

var stopwordSets = map[string]map[string]bool{}

func init() {
	for lang, ws := range stopwords {
		stopwordSets[lang] = map[string]bool{}
		for _, w := range ws {
			stopwordSets[lang][w] = true
		}
	}
}

// languageOf names the language of text, or "" when it cannot tell: fewer
// than 6 letters, no script with 60% of them, or Latin text whose function
// words do not single out one language.
func languageOf(text string) string {
	counts := map[string]int{}
	kana, letters := 0, 0
	for _, r := range text {
		if !unicode.IsLetter(r) {
			continue
		}
		letters++
		if unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) {
			kana++
		}
		counts[scriptOf(r)]++
	}
	cjk := counts["Han"] + counts["Hangul"]
	if letters < 6 && (cjk < 3 || cjk*10 < letters*6) {
		return "" // three Chinese characters are already a sentence
	}
	script := ""
	for s, n := range counts {
		if n*10 >= letters*6 {
			script = s
		}
	}
	switch script {
	case "":
		return ""
	case "Han":
		if kana*10 >= counts["Han"] {
			return "Japanese"
		}
		return "Chinese"
	case "Hangul":
		return "Korean"
	case "Cyrillic":
		return "Cyrillic-script"
	case "Latin":
		return latinLanguage(text)
	}
	return script
}

func latinLanguage(text string) string {
	lang, _ := latinLanguageStrength(text)
	return lang
}

// stopwordScores counts each Latin-script language's function words in
// text, and the words in all.
func stopwordScores(text string) (map[string]int, int) {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
	score := map[string]int{}
	for _, w := range words {
		for lang, set := range stopwordSets {
			if set[w] {
				score[lang]++
			}
		}
	}
	return score, len(words)
}

// latinLanguageStrength also says whether the language is beyond doubt:
// three function words or more, and twice as many as any other language
// has. Romance languages share many function words, so a mismatch between
// two Latin-script languages needs that.
func latinLanguageStrength(text string) (string, bool) {
	score, words := stopwordScores(text)
	if words < 3 {
		return "", false
	}
	best, second := "", 0
	for lang, n := range score {
		if best == "" || n > score[best] || n == score[best] && lang < best {
			if best != "" {
				second = max(second, score[best])
			}
			best = lang
		} else {
			second = max(second, n)
		}
	}
	if best == "" || score[best] < 2 || score[best]*2 < second*3 {
		return "", false
	}
	return best, score[best] >= 3 && score[best] >= 2*second
}

// languageCueRe finds a prompt that asks for a language, or for a
// translation: then an answer in another language is what was asked.
var languageCueRe = newCue(`(?i)translat|tradu|übersetz|english|chinese|mandarin|french|german|spanish|portuguese|italian|dutch|japanese|korean|russian|arabic|hindi|hebrew|thai|greek|français|anglais|español|inglés|deutsch|englisch|italiano|português|中文|英文|英语|英語|汉语|日语|日本語|韓国語|한국어|영어|翻译|翻訳|번역|на русском|по-русски|indonesian|bahasa|turkish|türkçe|polish|polski|vietnamese|tiếng|langu|idioma|sprache|in the language`)

// languageMismatch reports an answer fluent in another language than its
// prompt when the prompt did not ask for one: broken numerics often drift
// into another language. It says nothing when either side is too short to
// tell.
func languageMismatch(prompt, answer string) (from, to string, ok bool) {
	if languageCueRe.MatchString(prompt) {
		return "", "", false
	}
	// Code is in no natural language, and markup's tags are in none.
	answer = proseOf(unmarked(answer))
	from, to = languageOf(prompt), languageOf(answer)
	// Where a Latin-script language cannot be named (a short prompt, a
	// short answer), the script still tells: "Describe a cat." answered in
	// Cyrillic is a switch.
	if from == "" && onlyLatin(prompt) {
		from = "Latin script"
	}
	if to == "" && onlyLatin(answer) {
		to = "Latin script"
	}
	_, fromLatin := stopwordSets[from]
	_, toLatin := stopwordSets[to]
	fromLatin = fromLatin || from == "Latin script"
	toLatin = toLatin || to == "Latin script"
	switch {
	case from == "" || to == "" || from == to:
		return "", "", false
	case from == "Japanese" && to == "Chinese" && !strings.ContainsAny(answer, chineseOnly):
		// Kanji without kana (a table of cities, a list of names) is
		// Japanese too, unless Chinese grammar words or simplified
		// characters show.
		return "", "", false
	case fromLatin && toLatin:
		// Two Latin-script languages: both must be named, the prompt's
		// beyond doubt, and the answer must use its own language's function
		// words at least twice as often as the prompt's.
		if from == "Latin script" || to == "Latin script" || !clearlyOther(prompt, answer, from) {
			return "", "", false
		}
	}
	return from, to, true
}

// chineseOnly are characters Chinese writes often and Japanese hardly
// ever: grammar words (是, 吗, 呢) and simplified forms (这, 们, 个, 说).
const chineseOnly = "是这们个么它吗呢没说对还过给让从为东车长门马鸟"

// clearlyOther reports a prompt surely in lang and an answer whose best
// language has three function words or more and twice as many as lang.
func clearlyOther(prompt, answer, lang string) bool {
	if _, sure := latinLanguageStrength(prompt); !sure {
		return false
	}
	score, _ := stopwordScores(answer)
	best := ""
	for l, n := range score {
		if best == "" || n > score[best] || n == score[best] && l < best {
			best = l
		}
	}
	return best != lang && score[best] >= 3 && score[lang]*2 <= score[best]
}

// onlyLatin reports text of 6 letters or more, all but a tenth of them
// Latin: a prompt with Japanese around its Latin terms is not one.
func onlyLatin(text string) bool {
	latin, letters := 0, 0
	for _, r := range text {
		if unicode.IsLetter(r) {
			letters++
			if unicode.Is(unicode.Latin, r) {
				latin++
			}
		}
	}
	return letters >= 6 && latin*10 >= letters*9
}
