package classify

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNonwords: the spellings English has no word for are caught, the ones
// it has (odd onsets and codas included) are not, and so are not the
// capitalised, accented, vowel-less and digit-bearing tokens that names,
// loans, abbreviations and identifiers are.
func TestNonwords(t *testing.T) {
	for _, w := range strings.Fields("lbquilyade hatotg hmyathl plansl youirlcp stallwt pvouownb founl namk butn entd happ3ilyl tgorp vrelkt") {
		if !isNonword(w) {
			t.Errorf("isNonword(%q) = false, want true", w)
		}
	}
	for _, w := range strings.Fields(`the and strength twelfths texts months rhythm algorithms asthma phlegm debt yacht against midst
		burnt dreamt waltz quartz kitsch borscht psychology pneumonia mnemonic tsunami czar schmooze llama sphinx
		svelte shtick phthalate gnocchi knight wrists angst sculpts excerpt eighths chintz strlen cfg utf8 mp3 x86
		i18n k8s html http kg mm ml vs nth Pfizer Nguyen Dvořák Szczecin HTTP getElementById ohm john hymn kiln
		lynx twelfth warmth widths hawk newt shawl crowds growth`) {
		if isNonword(w) && !codeWords[w] {
			t.Errorf("isNonword(%q) = true, want false", w)
		}
	}
}

// TestNonwordSaladFalseAlarms: fluent text that spells words English has
// not is no salad: prose about the shell and C that names its commands
// bare, identifiers and acronyms, package names, other Latin-script
// languages (whose clusters English lacks), names, units and short
// answers.
func TestNonwordSaladFalseAlarms(t *testing.T) {
	runFalseAlarms(t, []falseAlarm{
		{"en all lower case, technical, run on", "How do I serve the model?",
			"sure. here is how to serve the model on a gpu whilst keeping the cpu free. put the settings in a yaml or toml file, point the server at the qwen checkpoint in onnx or gguf, and keep the mysql or postgresql database on the nvme disk. the gemm kernels use simd on the cpu side and the cgroup limits the memory, so fsync the logs and watch rmsnorm in the profile. the thousandth request behaves like the first, and the myrrh and dharma examples in the docs still pass.", false, Correct},
		{"en shell commands named bare", "How do I set up the build machine?",
			"First run mkdir build and then cd into it. Use cmake with ninja and pass nproc to set the jobs. If a download fails, wget the tarball again, and use htop to watch the load while dmesg shows the kernel messages. Check lsof when a port is busy and tmux to keep the session alive after you log out.", false, Correct},
		{"en C functions named bare", "Which C functions handle strings?",
			"In C you copy a string with strcpy or the safer strncpy, compare two with strcmp, and measure one with strlen. To print, use printf for the terminal, fprintf for a file and snprintf for a buffer with a size limit. Read a line with fgets, not gets, and remember that a nullptr check comes first in modern code. The cfg struct holds the utf8 flag.", false, Correct},
		{"en tools the code word list lacks", "Which command line tools do you like?",
			"Use jq to filter the JSON, then fzf to pick a file, rg to search and fd to find names. The bpftrace tool and perf show where the time goes. Install them with brew or apt, and check dstat and iostat for the disks. Then nvtop shows the GPU, and btop the CPU. The xsel tool copies to the clipboard and xclip does the same.", false, Correct},
		{"en identifiers and acronyms", "How do I find an element on the page?",
			"Call getElementById with the id of the element, or querySelector with a CSS selector. The DOM returns null when nothing matches, so check it before you read innerHTML. With HTML5 and ES2015 this works in every browser; in jQuery the same is done with a dollar sign. NVIDIA GPUs, the CUDA SDK, cuBLAS and cuDNN do not matter here at all.", false, Correct},
		{"en package names in a sentence", "Which Python packages do I need?",
			"You will need numpy and scipy for the maths, networkx for the graphs, and mpmath when you want more precision. For the data files install openpyxl and xlsxwriter, and for the web part aiohttp and httpcore. The tests use pytest with the respx plugin, and msgpack is used for the cache.", false, Correct},
		{"en names and places", "Tell me about famous composers.",
			"Antonín Dvořák was born near Prague, and Karol Szymanowski in Tymoszówka. Pyotr Tchaikovsky wrote his ballets in Moscow, while Mstislav Rostropovich played the cello and Zbigniew Preisner wrote for films. Nguyen Thien Dao studied in Paris and Mbappé is a footballer, not a composer, but Dmitri Shostakovich was one of the greatest of them all.", false, Correct},
		{"en units and numbers", "What are normal lab values?",
			"A normal fasting glucose is 3.9 to 5.5 mmol per litre, and blood pressure is about 120/80 mmHg. Sodium should be 135 to 145 mmol and potassium 3.5 to 5.0 mmol. A dose of 500 mg every 8 h is common, an infusion runs at 2 ml per kg per h, and the scan used 3 mSv at 120 kV. Results come back in 24 h.", false, Correct},
		{"en interjections in a story", "Write a short story.",
			"Argh, said the pirate, as the wind blew his hat away. Hmm, thought the parrot, that is the third hat this week. Shh, whispered the cabin boy, the captain is asleep. Pfft, said the cook, he is never asleep. Brr, it was cold on the deck, and the ship rocked all night long while the stars came out over the sea.", false, Correct},
		{"de prose", "Erzähl mir etwas über Berlin.",
			"Berlin ist die Hauptstadt von Deutschland und hat fast vier Millionen Einwohner. Die Stadt ist bekannt für ihre Geschichte, die Mauer, zahlreiche Museen und ein lebendiges Nachtleben. Im Sommer sitzen die Leute gern an der Spree, und im Winter besucht man die Weihnachtsmärkte. Pfannkuchen und Currywurst schmecken dort besonders gut.", false, Correct},
		{"pl prose", "Opowiedz mi o Krakowie.",
			"Kraków jest jednym z najstarszych miast w Polsce i przez wiele wieków był stolicą kraju. W centrum znajduje się Rynek Główny, a nad Wisłą stoi zamek na Wawelu. Szczególnie piękne są kościoły i kamienice, a wieczorem w przytulnych kawiarniach można zjeść pierogi i wypić gorącą herbatę z cytryną.", false, Correct},
		{"cs prose", "Řekni mi něco o Praze.",
			"Praha je hlavní město České republiky a leží na řece Vltavě. Karlův most spojuje Staré Město s Malou Stranou a v létě je plný turistů. Nad městem se tyčí Pražský hrad, kde sídlí prezident. Čtvrť Vinohrady je známá svými kavárnami a parky, a smrk roste v horách na severu země, kde je zima dlouhá.", false, Correct},
		{"nl prose", "Vertel me iets over Amsterdam.",
			"Amsterdam is de hoofdstad van Nederland en staat bekend om zijn grachten, fietsen en musea. In het centrum vind je het Rijksmuseum en het Van Gogh Museum. Veel mensen wonen op woonboten, en in de zomer zit je het liefst op een terras aan het water. Het weer is vaak wisselvallig, dus neem altijd een regenjas mee.", false, Correct},
		{"cy prose", "Tell me about Wales in Welsh.",
			"Mae Cymru yn wlad fach yng ngorllewin Prydain gyda mynyddoedd uchel a thraethau hardd. Caerdydd yw prifddinas y wlad, ac mae Eryri yn enwog am ei chopaon. Mae llawer o bobl yn siarad Cymraeg bob dydd, yn enwedig yn y gogledd a'r gorllewin, ac mae'r iaith yn fyw mewn ysgolion, papurau newydd a rhaglenni teledu.", false, Correct},
		{"fi prose", "Kerro minulle Helsingistä.",
			"Helsinki on Suomen pääkaupunki ja sijaitsee Itämeren rannalla. Kaupungissa on paljon puistoja, saaria ja kahviloita, ja kesällä ihmiset viettävät aikaa meren äärellä. Suomenlinna on vanha merilinnoitus, jonne pääsee lautalla kauppatorilta. Talvella päivät ovat lyhyitä, mutta lumi ja valot tekevät kaupungista kauniin.", false, Correct},
		{"sv prose", "Berätta om Stockholm.",
			"Stockholm är Sveriges huvudstad och är byggd på fjorton öar där Mälaren möter Östersjön. Gamla stan har smala gränder och färgglada hus, och på sommaren åker man skärgårdsbåt ut till öarna. Ljus och mörker växlar mycket under året, och tjejer och killar fikar gärna med kanelbullar och kaffe på eftermiddagen.", false, Correct},
		{"en short answer", "What is the capital of France?", "Paris.", false, Correct},
		{"en code answer unfenced", "Write a C hello world.",
			"#include <stdio.h>\n\nint main(void) {\n    printf(\"hello, world\\n\");\n    return 0;\n}\n\nCompile it with gcc hello.c -o hello and run ./hello to see the greeting printed on the terminal.", false, Correct},
	})
}

// Subword soup of the kind a broken FP4 or scale path writes: sub-word
// pieces glued into letter runs no language spells, among the short
// English words the model still gets right. Written for these tests, in
// the manner of the h100-fp4 run's global=dropped cells (see
// TestNonwordSaladRealRun), not copied from them.
var subwordSoups = []string{
	"the dog wentrk a big plonk and then very hapsltg to the park but tomgrl was so sadw and she lokt at the brdnwel it was tgrees of a littlek bmor sun in the gardnp with her mom she jumpd",
	"one day a girl named sue saw a cat in the tree and she was sad the cat frendk plaidmh with the ball and they rn happ4yly to the wentoms hmatl very big dogs but mom sdiad it was tmeeb to go home",
	"Tim and his dad went to the sea and they saw a fish, it was very srtmaf and shinyk but the fish swimdt away so Tim felt sad and his dad sadip wekcl lets go fwrem a bit of the tgrunk and hsmeabl was fun",
	"once there was a little bird who lived in a nest the bird was hungryt and sadgh so it flewnk to the farm and foundl a wormtp in the grasslb it ate the worm and was very happy with its momf and dadl",
}

// TestNonwordSalad: subword soup is garbage, with the non-words named.
func TestNonwordSalad(t *testing.T) {
	prompts := []string{"Write a short story.", "Tell me a story about a girl.", "Write a story about the sea.", "Tell me a story about a bird."}
	for i, s := range subwordSoups {
		g, why := garbled(s, textContext{prompt: prompts[i], ended: true})
		if !g || !strings.Contains(why, "word salad: ") || !strings.Contains(why, "no word of any language") {
			t.Errorf("soup %d: garbled %v (%s), want a word salad\ntext: %s", i, g, why, s)
		}
	}
	// A story of the same words, spelled, is fine.
	if g, why := Garbled("the dog went to the park and then ran very fast to the big tree, but Tom was sad and he looked at the bird in the garden with his mom and dad, and then they all went home for tea"); g {
		t.Errorf("a plain story is garbled: %s", why)
	}
}

// TestNonwordSaladRealRun: the h100-fp4 run's cells that drop the FP4
// global scale write subword soup; the detector calls at least one probe
// of each such cell a word salad, and no probe of any other cell of the
// committed GPU runs.
func TestNonwordSaladRealRun(t *testing.T) {
	runs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "torch-gpu", "*", "run", "results.jsonl"))
	if len(runs) == 0 {
		t.Skip("no committed runs")
	}
	dropped, caught := 0, 0
	for _, p := range runs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			var r struct {
				Cell         struct{ ID string }
				Observations []struct{ Prompt, Text string }
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			soup := strings.Contains(r.Cell.ID, "global=dropped")
			found := false
			for _, o := range r.Observations {
				prose := proseOf(o.Text)
				why := nonwordSalad(prose, tokens(prose), textContext{prompt: o.Prompt})
				if why != "" && !soup {
					t.Errorf("%s %s: %s\ntext: %q", p, r.Cell.ID, why, o.Text)
				}
				found = found || why != ""
			}
			if soup {
				dropped++
				if found {
					caught++
				} else {
					t.Errorf("%s %s: no probe called a word salad", p, r.Cell.ID)
				}
			}
		}
		f.Close()
	}
	if dropped == 0 {
		t.Error("no global=dropped cell in the committed runs")
	}
	t.Logf("%d of %d global=dropped cells caught", caught, dropped)
}
