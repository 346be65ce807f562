package classify

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// falseAlarm is a reply judged by shape alone (no expectation), as `bmx
// classify` judges a recorded probe, and the verdict a careful engineer
// gives it.
type falseAlarm struct {
	name, prompt, text string
	truncated          bool
	want               Verdict
}

func (fa falseAlarm) observation() evidence.Observation {
	o := evidence.Observation{Probe: "p", Kind: evidence.Chat, Prompt: fa.prompt, MaxTokens: 512,
		Text: fa.text, FinishReason: "stop", HTTPStatus: 200}
	if fa.truncated {
		o.FinishReason = "length"
	}
	return o
}

// runFalseAlarms judges each reply alone and as the only probe of a cell.
func runFalseAlarms(t *testing.T, tests []falseAlarm) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.observation()
			v, reason, _ := Observation(o)
			if v != tt.want {
				t.Errorf("verdict %s (%s), want %s\ntext: %q", v, reason, tt.want, tt.text)
			}
			if j := Cell(Input{Observations: []evidence.Observation{o}}); j.Verdict != tt.want {
				t.Errorf("cell %s (%s), want %s", j.Verdict, j.Reason, tt.want)
			}
		})
	}
}

// TestFalseAlarmEmphasis: a burst of "!" or "?" that ends a sentence of
// fluent text is emphasis, in any language and width; a run of "!" with
// nothing else, after a number, far longer than emphasis, or filling the
// end of a reply cut off at max_tokens is the NaN shape still.
func TestFalseAlarmEmphasis(t *testing.T) {
	runFalseAlarms(t, []falseAlarm{
		{"en bangs mid-text", "Tell me about your day.", "What a day!!!!!! I can't believe it actually happened. We won the final!!!!!!!! Everyone was cheering.", false, Correct},
		{"en questions", "Tell me about your day.", "Really??? Are you sure??? I thought the meeting was tomorrow, not today??????", false, Correct},
		{"en mixed ?! then bangs", "Tell me what happened.", "Wait, what?!?!?! That can't be right!!!!!! Let me check the numbers again.", false, Correct},
		{"en bangs at the end of a finished reply", "How was the concert?", "The concert was absolutely amazing!!!!!!!", false, Correct},
		{"de bangs", "Erzähl mir von deinem Tag.", "Was für ein Tag!!!!!!! Ich kann es kaum glauben. Wir haben das Finale gewonnen!!!!!!", false, Correct},
		{"fr spaced bangs", "Raconte ta journée en quelques phrases.", "Quelle journée !!!!!! Je n'arrive pas à y croire, nous avons gagné la finale. C'est vraiment incroyable ??????? Oui, et tout le monde est content.", false, Correct},
		{"ru bangs and questions", "Расскажи о своём дне.", "Какой день!!!!!! Не могу поверить, что мы выиграли. Правда??????? Да, правда.", false, Correct},
		{"zh full-width bangs and questions", "讲讲你今天过得怎么样。", "今天真是太棒了！！！！！！我简直不敢相信我们赢了。真的吗？？？？？？是真的。", false, Correct},
		{"ja full-width bangs and questions", "今日はどうでしたか？", "最高の一日でした！！！！！！本当に信じられません。え？？？？？？本当ですか。", false, Correct},

		{"bangs alone", "Say hi.", "!!!!!!!!", false, Garbage},
		{"full-width bangs alone", "打个招呼。", "！！！！！！！！", false, Garbage},
		{"bangs after a number", "What is 31+31?", "62!!!!!!!!", false, Garbage},
		{"bangs after one word", "What is the capital of France?", "Paris!!!!!!!", false, Garbage},
		{"bangs far longer than emphasis", "Tell me about your day.", "What a day" + strings.Repeat("!", 40) + " I can't believe it.", false, Garbage},
		{"zh full-width bangs far longer than emphasis", "讲讲你今天过得怎么样。", "今天真是太棒了" + strings.Repeat("！", 30), false, Garbage},
		{"bangs filling a cut-off tail", "Tell me about your day.", "What a day it has been, I can't believe it!!!!!!", true, Garbage},
		{"question marks where words should be", "What is the capital of Russia?", "The capital of Russia is ?????? and it is very large.", false, Garbage},
		{"de question marks alone after a space", "Wie heißt die Hauptstadt?", "Die Hauptstadt heißt ???????", false, Garbage},
	})
	// Judged alone, a text is not known to have ended by itself: a burst
	// that more text follows is emphasis, one at its end may be a sampler
	// stuck on token 0 until it was cut off.
	for _, tt := range []struct {
		text    string
		garbled bool
	}{
		{"What a day!!!!!! I can't believe it.", false},
		{"今天真是太棒了！！！！！！我简直不敢相信。", false},
		{"The concert was absolutely amazing!!!!!!!", true},
	} {
		if g, why := Garbled(tt.text); g != tt.garbled {
			t.Errorf("Garbled(%q) = %v (%s), want %v", tt.text, g, why, tt.garbled)
		}
	}
}

// TestFalseAlarmExam: exam and cloze formatting with full-width marks (a
// pair of brackets around ideographic spaces, a run of full-width
// underscores, full-width numbers and option letters) is a question, not
// garbage; the same layout around salad, or a numbering with nothing after
// it, is garbage.
func TestFalseAlarmExam(t *testing.T) {
	runFalseAlarms(t, []falseAlarm{
		{"zh cloze with full-width underscores", "出一道填空题。", "１．中国的首都是＿＿＿＿＿＿。\n２．日本的首都是＿＿＿＿＿＿。\n３．法国的首都是＿＿＿＿＿＿。", false, Correct},
		{"zh multiple choice with full-width options", "出一道选择题。", "１．下列城市中，哪一个是中国的首都？（　　）\nＡ．上海　　Ｂ．北京　　Ｃ．广州　　Ｄ．深圳\n２．下列哪个是质数？（　　）\nＡ．４　　Ｂ．６　　Ｃ．７　　Ｄ．９", false, Correct},
		{"zh reading cloze", "出一道填空题。", "阅读下面的句子，在横线上填写恰当的词语。\n（１）春天来了，小草＿＿＿＿地钻出了地面。\n（２）他＿＿＿＿地完成了作业。\n（３）天空中飘着＿＿＿＿的白云。", false, Correct},
		{"ja multiple choice", "選択問題を作ってください。", "問１　日本の首都はどこですか。（　　）\nＡ．大阪　Ｂ．東京　Ｃ．京都　Ｄ．札幌\n問２　次の文の＿＿＿に入る言葉を選びなさい。\n私は毎朝＿＿＿を飲みます。\nＡ．コーヒー　Ｂ．本　Ｃ．車　Ｄ．山", false, Correct},
		{"ja cloze with full-width numbers", "穴埋め問題を作って。", "１．富士山は日本で一番（　　　）山です。\n２．水は１００度で（　　　）。\n３．一年は（　　　）か月です。", false, Correct},
		{"en cloze with blanks", "Write a fill-in-the-blank quiz.", "1. The capital of France is ＿＿＿＿＿＿.\n2. Water boils at ＿＿＿＿ degrees Celsius.\n3. The largest planet is (        ).", false, Correct},
		{"de cloze", "Erstelle einen Lückentext.", "1. Die Hauptstadt von Deutschland ist ________.\n2. Der Rhein fließt durch ________ und die Niederlande.\n3. Ein Jahr hat ________ Monate.", false, Correct},
		{"ru cloze", "Составь упражнение с пропусками.", "１．Столица России — ＿＿＿＿＿＿.\n２．Вода кипит при ＿＿＿＿ градусах.\n３．В году ＿＿＿＿ месяцев.", false, Correct},
		{"ko exam with circled options", "다음 중 옳은 것을 고르는 문제를 만들어 주세요.", "1. 대한민국의 수도는 어디입니까? (　　)\n① 부산　② 서울　③ 대구　④ 인천\n2. 다음 빈칸에 알맞은 말은? 나는 매일 아침 ＿＿＿를 마신다.\n① 커피　② 책　③ 자동차　④ 산", false, Correct},
		{"zh dotted blanks", "出一道填空题。", "１．中国的首都是…………………………。\n２．长江是中国最长的…………………………。", false, Correct},
		{"en form of long blanks", "Write a simple form.", "Name: " + strings.Repeat("_", 50) + "\nDate: " + strings.Repeat("_", 50) + "\nSignature: " + strings.Repeat("_", 50), false, Correct},

		{"zh exam layout around salad", "出一道选择题。", "１．下列城市中складаระ并被渝（　　）\nＡ．Keg治愈　Ｂ．cevap Hans　Ｃ．Female当然是　Ｄ．nỗ", false, Garbage},
		{"full-width numbering with nothing after it", "出一道选择题。", "１．\n２．\n３．\n４．\n５．", false, Garbage},
		{"full-width underscores alone", "出一道填空题。", strings.Repeat("＿", 50), false, Garbage},
		{"blanks alone", "出一道填空题。", strings.Repeat("（　　）", 12), false, Garbage},
		{"underscores filling a cut-off tail", "Write a simple form.", "Name: " + strings.Repeat("_", 60), true, Garbage},
		{"ja blanks then a loop", "穴埋め問題を作って。", "１．富士山は日本で一番（　　　）山です。" + strings.Repeat("ですです", 8), false, Garbage},
	})
}

// TestFalseAlarmMarkup: markup repeats its tags by design (<li> for every
// item, <tr><td> for every row, a Markdown table's pipes); the same markup
// around one item said over and over, or around salad, is garbage.
func TestFalseAlarmMarkup(t *testing.T) {
	table := "| Feature | vLLM | SGLang | TRT-LLM | TGI |\n|---|---|---|---|---|\n" +
		"| Streaming | Yes | Yes | Yes | Yes |\n| Prefix caching | Yes | Yes | Yes | No |\n" +
		"| Speculative decoding | Yes | Yes | Yes | Yes |\n| LoRA | Yes | Yes | Yes | Yes |"
	runFalseAlarms(t, []falseAlarm{
		{"en html list", "Write HTML for a shopping list.", "<ul>\n  <li>Milk</li>\n  <li>Eggs</li>\n  <li>Bread</li>\n  <li>Butter</li>\n  <li>Cheese</li>\n  <li>Apples</li>\n</ul>", false, Correct},
		{"en html list on one line", "Write an HTML list of numbers in words.", "<ul><li>One</li><li>Two</li><li>Three</li><li>Four</li><li>Five</li><li>Six</li><li>Seven</li><li>Eight</li></ul>", false, Correct},
		{"en html table rows", "Write an HTML table of four people and their ages.", "<table>\n<tr><th>Name</th><th>Age</th></tr>\n<tr><td>Alice</td><td>30</td></tr>\n<tr><td>Bob</td><td>25</td></tr>\n<tr><td>Carol</td><td>41</td></tr>\n<tr><td>Dave</td><td>52</td></tr>\n</table>", false, Correct},
		{"de html list", "Erstelle eine HTML-Liste mit Obst.", "<ol>\n<li>Äpfel</li>\n<li>Birnen</li>\n<li>Kirschen</li>\n<li>Pflaumen</li>\n</ol>", false, Correct},
		{"zh html table", "做一个HTML表格，列出三个城市的人口。", "<table>\n<tr><th>城市</th><th>人口</th></tr>\n<tr><td>北京</td><td>2100万</td></tr>\n<tr><td>上海</td><td>2400万</td></tr>\n<tr><td>广州</td><td>1800万</td></tr>\n</table>", false, Correct},
		{"zh html table of numbers, tags outnumbering the letters", "做一个HTML表格，列出八个城市的人口和面积。", "<table>\n<thead><tr><th>城市</th><th>人口</th><th>面积</th></tr></thead>\n<tbody>\n" +
			"<tr><td>北京</td><td align=\"right\">2189</td><td align=\"right\">16410</td></tr>\n<tr><td>上海</td><td align=\"right\">2487</td><td align=\"right\">6340</td></tr>\n" +
			"<tr><td>广州</td><td align=\"right\">1868</td><td align=\"right\">7434</td></tr>\n<tr><td>深圳</td><td align=\"right\">1756</td><td align=\"right\">1997</td></tr>\n" +
			"<tr><td>成都</td><td align=\"right\">2094</td><td align=\"right\">14335</td></tr>\n<tr><td>重庆</td><td align=\"right\">3213</td><td align=\"right\">82402</td></tr>\n" +
			"<tr><td>天津</td><td align=\"right\">1386</td><td align=\"right\">11966</td></tr>\n<tr><td>武汉</td><td align=\"right\">1364</td><td align=\"right\">8569</td></tr>\n" +
			"</tbody>\n</table>", false, Correct},
		{"ja html list", "果物のHTMLリストを作って。", "<ul><li>りんご</li><li>みかん</li><li>ぶどう</li><li>もも</li></ul>", false, Correct},
		{"ru html list", "Сделай HTML-список городов.", "<ul>\n<li>Москва</li>\n<li>Санкт-Петербург</li>\n<li>Казань</li>\n<li>Новосибирск</li>\n</ul>", false, Correct},
		{"en markdown feature matrix", "Compare vLLM, SGLang, TRT-LLM and TGI features.", table, false, Correct},
		{"en compact markdown matrix", "Compare the engines' features.", "|Engine|FP8|LoRA|Stream|Cache|\n|---|---|---|---|---|\n|vLLM|Yes|Yes|Yes|Yes|\n|SGLang|Yes|Yes|Yes|Yes|", false, Correct},
		{"en xml records", "Give me the catalogue as XML.", "<catalog>\n  <book><title>Dune</title><author>Herbert</author><price>9.99</price></book>\n  <book><title>Emma</title><author>Austen</author><price>5.49</price></book>\n  <book><title>Ulysses</title><author>Joyce</author><price>12.00</price></book>\n</catalog>", false, Correct},
		{"en html matrix of one value", "Show which engines support which features, as HTML.", "<table>\n<tr><th>Engine</th><th>FP8</th><th>LoRA</th><th>Streaming</th><th>Prefix cache</th></tr>\n<tr><td>vLLM</td><td>yes</td><td>yes</td><td>yes</td><td>yes</td></tr>\n<tr><td>SGLang</td><td>yes</td><td>yes</td><td>yes</td><td>yes</td></tr>\n</table>", false, Correct},

		{"html list of one item over and over", "Write HTML for a shopping list.", "<ul>" + strings.Repeat("<li>Milk</li>", 8) + "</ul>", false, Garbage},
		{"html table of salad", "做一个HTML表格。", "<table><tr><td>складаระ并被渝</td><td>Keg治愈cevap</td></tr><tr><td>Female当然是nỗ</td><td>userтехнологияstatement</td></tr></table>", false, Garbage},
		{"html tags in a loop", "Write an HTML paragraph.", "<p>Hello</p>" + strings.Repeat("<br>", 20), false, Garbage},
		{"markdown table of one row over and over", "Make a table of three countries and their capitals.", "| Country | Capital |\n|---|---|" + strings.Repeat("\n| France | Paris |", 6), false, Garbage},
		{"a word and pipes in a loop, no table", "Tell me something.", "Yes|Yes|Yes|Yes|Yes|Yes|Yes|Yes", false, Garbage},
		{"markdown table of empty rows", "Make a table of three countries and their capitals.", "| Country | Capital |\n|---|---|\n| | |\n| | |\n| | |\n| | |\n| | |", true, Garbage},
	})
}

// TestFalseAlarmBanner: a comment banner of one mark said over and over
// decorates code in any comment syntax; a run of the same marks inside a
// sentence, alone, or of marks that end sentences is garbage.
func TestFalseAlarmBanner(t *testing.T) {
	runFalseAlarms(t, []falseAlarm{
		{"python hash banner", "Write a Python function with a banner comment.", "# ==========================================\n# Utilities\n# ==========================================\ndef add(a, b):\n    return a + b", false, Correct},
		{"c star banner", "Write a C function that adds two ints, with a banner comment.", "/*********************************************************************/\n/* add two ints                                                      */\n/*********************************************************************/\nint add(int a, int b) { return a + b; }", false, Correct},
		{"c equals banner inline", "Write a C function that adds two ints.", "/* ========== helpers ========== */\nint add(int a, int b) { return a + b; }\n/*==========*/", false, Correct},
		{"sql dash banner", "Write the SQL for a users table.", "-- ------------------------------------------------------------------\n-- Create the users table\n-- ------------------------------------------------------------------\nCREATE TABLE users (id INT PRIMARY KEY, name TEXT);", false, Correct},
		{"js slash banner", "Write a JavaScript helper with a banner comment.", "//////////\n// helpers\n//////////\nfunction add(a, b) { return a + b; }", false, Correct},
		{"lisp semicolon banner", "Write a Lisp function that adds two numbers.", ";;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;\n;;; Utilities\n;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;\n(defun add (a b) (+ a b))", false, Correct},
		{"matlab percent banner", "Write MATLAB code that computes a mean.", "%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%\n% compute the mean\n%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%\nm = mean(x);", false, Correct},
		{"html comment banner", "Write an HTML page with a banner comment.", "<!-- ========================================== -->\n<!-- Header                                     -->\n<!-- ========================================== -->\n<h1>Welcome</h1>\n<p>This is my page.</p>", false, Correct},
		{"zh box around a title", "写一段小说的开头，标题加一个框。", "╔══════════════════╗\n║   第一章 开始    ║\n╚══════════════════╝\n故事从这里开始。\n那一年，他十八岁。", false, Correct},
		{"zh box-drawing chapter banner", "写一段小说的开头。", "━━━━━━━━ 第一章 ━━━━━━━━\n那天晚上，雨下得很大。\n他站在窗前，看着远处的灯光。", false, Correct},
		{"de banner in a code reply cut off", "Schreibe ein Python-Skript mit einem Kopfkommentar.", "# Skript: zaehlen.py\n# Autor: du\n# -------------------------------", true, Correct},

		{"bangs drawn as a line", "Tell me a short story.", "Once upon a time there was a fox.\n!!!!!!!!!!!!!!!!!!!!\nThe fox ran into the forest.", false, Garbage},
		{"semicolons alone", "Write a Lisp function that adds two numbers.", strings.Repeat(";", 44), false, Garbage},
		{"percent run inside a sentence", "What is the growth rate?", "The growth rate this year is %%%%%%%%%%%%%%%%%% and rising.", false, Garbage},
		{"zh commas drawn as a line", "讲一个小故事。", "从前有一只狐狸。\n，，，，，，，，，，，，\n它跑进了森林。", false, Garbage},
	})
}

// TestFalseAlarmAskedRepetition: repetition the prompt asked for, by a
// count of times or a verb to repeat in any language, is the answer; the
// same repetition unasked, or of something the prompt did not ask for, is
// a loop.
func TestFalseAlarmAskedRepetition(t *testing.T) {
	runFalseAlarms(t, []falseAlarm{
		{"en say hello ten times", "Say 'hello' ten times.", "hello hello hello hello hello hello hello hello hello hello", false, Correct},
		{"en say hello ten times with marks", "Say 'hello' ten times.", "Hello! Hello! Hello! Hello! Hello! Hello! Hello! Hello! Hello! Hello!", false, Correct},
		{"en na twenty times", "Write the word 'na' 20 times.", strings.TrimSpace(strings.Repeat("na ", 20)), false, Correct},
		{"en repeat a phrase", `repeat "I love Go" 5 times`, "I love Go I love Go I love Go I love Go I love Go", false, Correct},
		{"en lines of a sentence", "Write 'I will not talk in class' five times.", strings.Repeat("I will not talk in class.\n", 5), false, Correct},
		{"de zehnmal", "Schreibe zehnmal das Wort „Hallo“.", strings.TrimSpace(strings.Repeat("Hallo ", 10)), false, Correct},
		{"de sentence viermal", "Schreibe den Satz „Ich lerne jeden Tag Deutsch“ viermal.", strings.Repeat("Ich lerne jeden Tag Deutsch.\n", 4), false, Correct},
		{"fr cinq fois", "Écris cinq fois le mot « bonjour ».", "bonjour bonjour bonjour bonjour bonjour", false, Correct},
		{"es cinco veces", "Repite la palabra 'hola' cinco veces.", "hola hola hola hola hola", false, Correct},
		{"ru desyat raz", "Напиши слово «привет» десять раз.", strings.TrimSpace(strings.Repeat("привет ", 10)), false, Correct},
		{"zh shi bian", "把“你好”说十遍。", strings.Repeat("你好", 10), false, Correct},
		{"zh wu ci with commas", "把“你好”写五次，用逗号隔开。", "你好，你好，你好，你好，你好", false, Correct},
		{"ja full-width five times", "「ありがとう」を５回書いてください。", "ありがとう、ありがとう、ありがとう、ありがとう、ありがとう", false, Correct},
		{"ja five times glued", "「ありがとう」を5回言って。", strings.Repeat("ありがとう", 5), false, Correct},
		{"it cinque volte", "Scrivi 'ciao' cinque volte.", "ciao ciao ciao ciao ciao", false, Correct},
		{"ko daseot beon", "'안녕'을 다섯 번 써 줘.", "안녕 안녕 안녕 안녕 안녕", false, Correct},
		{"en numbered lines asked", "List the word 'hello' five times, numbered.", "1. hello\n2. hello\n3. hello\n4. hello\n5. hello", false, Correct},

		{"en unasked", "Say hello.", "hello hello hello hello hello hello", false, Garbage},
		{"en asked, but another word loops", "Say 'hello' ten times.", "the the the the the the the the", false, Garbage},
		{"en asked a sentence, another loops", "Write 'I will not talk in class' five times.", strings.Repeat("The cat sat on the mat today.\n", 5), false, Garbage},
		{"en normal is no count", "Describe a normal day.", "day day day day day day", false, Garbage},
		{"de unasked", "Erzähl mir etwas über Berlin.", "Berlin Berlin Berlin Berlin Berlin Berlin", false, Garbage},
		{"de asked, but another word loops", "Schreibe zehnmal das Wort „Hallo“.", "Tschüss Tschüss Tschüss Tschüss Tschüss", false, Garbage},
		{"fr unasked sentence loop", "Parle-moi de Paris.", strings.Repeat("Paris est une très belle ville. ", 5), false, Garbage},
		{"ru unasked", "Расскажи о Москве.", "Москва Москва Москва Москва Москва Москва", false, Garbage},
		{"zh unasked", "介绍一下北京。", strings.Repeat("北京", 8), false, Garbage},
		{"zh once is no repetition", "说一次“你好”。", strings.Repeat("你好", 6), false, Garbage},
		{"fr once upon a time is no count", "Il était une fois un renard. Continue l'histoire.", "Il était une fois un renard renard qui vivait vivait dans la forêt forêt.", false, Garbage},
		{"es sometimes is no count", "A veces llueve. Describe la lluvia.", "lluvia lluvia lluvia lluvia lluvia", false, Garbage},
		{"ja unasked", "東京について教えて。", strings.Repeat("東京", 8), false, Garbage},
	})
}

// TestGatewayTimeoutIsHang: a request that timed out at a gateway (HTTP
// 504) or in the engine itself, while the server lived, is a hang; the
// same 504 from a server whose process ended, or that logged its death,
// is a crash, and other 5xx stay crashes.
func TestGatewayTimeoutIsHang(t *testing.T) {
	decoding := "INFO 03-14 09:12:01 scheduler.py:99] Decode batch. #running-req: 1, #token: 512, gen throughput (token/s): 41.2\n" +
		"INFO 03-14 09:12:02 scheduler.py:99] Decode batch. #running-req: 1, #token: 552, gen throughput (token/s): 40.9\n"
	gateway := func(status int, body string) evidence.Observation {
		return evidence.Observation{Probe: "story", Kind: evidence.Chat, Prompt: "Tell me a story.", MaxTokens: 256,
			HTTPStatus: status, Err: body, ErrKind: evidence.HTTPError}
	}
	ok := evidence.Observation{Probe: "math", Kind: evidence.Chat, Prompt: "What is 2+2?", Expect: evidence.Number(4),
		Text: "4", FinishReason: "stop", HTTPStatus: 200}
	// A recorded case from elsewhere carries only the status and the body.
	recorded := gateway(504, "<html><head><title>504 Gateway Time-out</title></head></html>")
	recorded.ErrKind = ""
	tests := []struct {
		name  string
		in    Input
		want  Verdict
		sigOf string // what the signature must hold
	}{
		{"504 from a proxy, engine silent mid-decode", Input{Log: decoding, Observations: []evidence.Observation{ok, gateway(504, "upstream request timeout")}}, Hang, "stuck after: Decode batch"},
		{"504 in a recorded case", Input{Log: decoding, Observations: []evidence.Observation{ok, recorded}}, Hang, "stuck after"},
		{"504 with an empty log", Input{Observations: []evidence.Observation{gateway(504, "Gateway Timeout")}}, Hang, "stuck with an empty log"},
		{"engine's own request timeout", Input{Log: decoding, Observations: []evidence.Observation{ok, gateway(500, `{"error":{"message":"Request timed out after 600 seconds","type":"TimeoutError"}}`)}}, Hang, "stuck after"},
		{"503 naming a timeout", Input{Log: decoding, Observations: []evidence.Observation{gateway(503, "asyncio.TimeoutError: generation timed out")}}, Hang, "stuck after"},

		{"504 after the process died", Input{Log: decoding, Exit: &evidence.Exit{Code: -1, Signal: "SIGSEGV"}, Observations: []evidence.Observation{ok, gateway(504, "upstream request timeout")}}, Crash, "SIGSEGV"},
		{"504 after a fatal line", Input{Log: decoding + "[2025-06-26 07:25:31 TP0] Scheduler hit an exception: RuntimeError: boom\n", Observations: []evidence.Observation{ok, gateway(504, "upstream request timeout")}}, Crash, ""},
		{"504 while a worker's CUDA error stalled the rest", Input{Log: decoding + "RuntimeError: CUDA error: an illegal memory access was encountered\n", Observations: []evidence.Observation{gateway(504, "upstream request timeout")}}, Crash, "CUDA error"},
		{"502 bad gateway", Input{Log: decoding, Observations: []evidence.Observation{gateway(502, "Bad Gateway")}}, Crash, ""},
		{"500 internal error", Input{Log: decoding, Observations: []evidence.Observation{gateway(500, "Internal Server Error")}}, Crash, ""},
		{"500 of a CUDA launch timeout", Input{Log: decoding, Observations: []evidence.Observation{gateway(500, "CUDA error: the launch timed out and was terminated")}}, Crash, "CUDA error"},
		{"500 naming NaN stays nan", Input{Observations: []evidence.Observation{gateway(500, "Out of range float values are not JSON compliant")}}, NaN, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Cell(tt.in)
			if j.Verdict != tt.want {
				t.Fatalf("verdict %s (%s), want %s", j.Verdict, j.Reason, tt.want)
			}
			if (j.Verdict == Hang || j.Verdict == Crash || j.Verdict == NaN) && j.Signature == "" {
				t.Errorf("%s without a signature (%s)", j.Verdict, j.Reason)
			}
			if !strings.Contains(j.Signature, tt.sigOf) {
				t.Errorf("signature %q, want it to hold %q", j.Signature, tt.sigOf)
			}
		})
	}
}

// TestTimedOutCountsGateways: a gateway's 504 or the engine's own request
// timeout makes a cell timed out as the harness's own timeout does (the
// launcher then sends no more probes and takes forensics); a plain 500
// does not.
func TestTimedOutCountsGateways(t *testing.T) {
	for _, tc := range []struct {
		o    evidence.Observation
		want bool
	}{
		{evidence.Observation{Probe: "p", HTTPStatus: 504, Err: "Gateway Timeout", ErrKind: evidence.HTTPError}, true},
		{evidence.Observation{Probe: "p", HTTPStatus: 500, Err: "Request timed out after 600s", ErrKind: evidence.HTTPError}, true},
		{evidence.Observation{Probe: "p", HTTPStatus: 500, Err: "CUDA error: the launch timed out and was terminated", ErrKind: evidence.HTTPError}, false},
		{evidence.Observation{Probe: "p", HTTPStatus: 500, Err: "Internal Server Error", ErrKind: evidence.HTTPError}, false},
		{evidence.Observation{Probe: "p", ErrKind: evidence.Timeout}, true},
	} {
		if got := TimedOut([]evidence.Observation{tc.o}); got != tc.want {
			t.Errorf("%d %q: timed out %v, want %v", tc.o.HTTPStatus, tc.o.Err, got, tc.want)
		}
	}
}
