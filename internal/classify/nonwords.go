package classify

import (
	"fmt"
	"strings"
	"unicode"
)

// Subword soup: a broken model glues sub-word pieces into letter sequences
// no language spells ("lbquilyade", "hatotg", "happ3ilyl"), between the
// short words it still gets right. Each piece is a real token, so no
// character or token count sees it; what gives it away is how the pieces
// join: a word that begins or ends on consonants English never puts
// together there, or a digit inside a lower-case word.
//
// English spelling alone is judged, and only where languageOf says the
// prose is English: German, Polish, Czech, Welsh or Dutch begin and end
// words on clusters English does not (pf-, szcz-, -rzt, -ddf), and a
// Latin-script text whose language cannot be named is left alone. Only
// lower-case words of plain ASCII letters are read: a capital word is a
// name or an acronym ("Nguyen", "Pfizer", "HTTP"), an accented one is a
// loan, one with marks or digits mostly an identifier, and a word without
// a vowel an abbreviation or a unit ("cfg", "kg", "html").

// legalOnsets are the consonant letters an English word may begin with
// (loans from Greek, German, Yiddish and others included: "pneumonia",
// "schmooze", "tsunami", "czar"); any single consonant may.
var legalOnsets = map[string]bool{}

// legalCodas are the consonant letters an English word may end on, before
// an inflection's s ("texts", "months"); any single consonant may.
var legalCodas = map[string]bool{}

func init() {
	for _, o := range strings.Fields(`bl br ch chl chr cl cr cz dj dr dw dz fj fl fr gh gl gn gr gw kh kl kn kr kv kw
		mn ph phl phr pl pn pr ps pt rh sc sch schl schm schn schr schw scl scr sh shl shm shn shr sk skr sl sm sn
		sp sph spl spr sq st str sv sw th thr thw tr ts tw tz vl wh wr zh zw pf sf ll vr zl sht phth chth sz dh`) {
		legalOnsets[o] = true
	}
	for _, c := range strings.Fields(`bb ck ct dd ff ft gg gh ght gn ld lf lk ll lm ln lp lt lb lch lsh lth lfth
		mb mn mp mpt mph nc nch nd ng ngth nk nn nt nth nx nz ngst pp pt ph pth rb rc rch rd rf rg rk rl rld rm rmth
		rn rp rr rsh rst rt rth rv rz sh sk sm sp ss st sch tch th tt tz wk wl wn wd wth xt xth zz dth fth dt
		ch sc cht bt gm thm hm hn hh nst dst rnt mt ltz rtz ntz tsch nsch rsch rscht ghth lph rph rpt lpt nct wt sth
		lst ndth rrh nkh`) {
		legalCodas[c] = true
	}
}

// vowelLetters are the letters that make a syllable in English spelling.
const vowelLetters = "aeiouy"

// nonwordDigitRe is a lower-case word with a digit inside it, letters on
// both sides ("happ3ilyl"): not a unit or version ("mp3", "utf8", "x86"),
// which ends or begins on the digits, nor a numeronym ("i18n", "k8s").
var nonwordDigitRe = lazyRE(`^[a-z]{3,}\d[a-z]{3,}$`)

// minNonword is the shortest word judged by its spelling: shorter ones
// are as often abbreviations, units and jargon (gpu, yaml, gemm, simd) as
// fragments, and a salad has longer ones too.
const minNonword = 4

// isNonword reports a lower-case ASCII word English cannot spell: an onset
// or a coda no English word has, or a digit between runs of letters.
func isNonword(w string) bool {
	if nonwordDigitRe.MatchString(w) {
		return true
	}
	if len(w) < minNonword || strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
		return false
	}
	first := strings.IndexAny(w, vowelLetters)
	if first < 0 {
		return false // "cfg", "html", "kg": abbreviations and units
	}
	if first == 1 && w[0] == 'y' {
		first = 0 // "yacht": y as a consonant
	}
	if onset := w[:first]; len(onset) > 1 && !legalOnsets[onset] {
		return true
	}
	last := strings.LastIndexAny(w, vowelLetters)
	coda := w[last+1:]
	if len(coda) > 1 && strings.HasSuffix(coda, "s") {
		coda = coda[:len(coda)-1] // "texts", "months"
	}
	return len(coda) > 1 && !legalCodas[coda]
}

// codeWords are lower-case words of code and the shell that English prose
// names bare, and that English could not spell: commands, C and Rust
// names, model formats.
var codeWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`mkdir rmdir nproc wget htop dmesg lsof lsblk lsusb lspci fdisk tmux systemctl
		journalctl sysctl ctl sglang dtype dtypes ndarray ndim gguf stdout stdin stderr stdlib stdio stdint printf
		fprintf sprintf snprintf fgets fputs strcpy strncpy strcmp strncmp strcat strtok nullptr constexpr impl
		println eprintln endl nginx cmake qmake bzip gzip xz ggml kwarg nvidia nvcc cublas cudnn tmpfs procfs sysfs
		btrfs ext ntfs exfat pytest numpy scipy sympy jupyter ipynb kubectl helm grpc uvicorn gunicorn npx pnpm
		yarn webpack dotenv stdlibs mmap munmap ioctl fcntl pthread malloc calloc realloc memcpy memset
		memmove sizeof typedef struct enum elif init len args kwargs argv argc ctypes cdef etc env inf conf regexp
		rsync gsutil uintptr autocmd vimrc systemd strlen strdup strstr strchr mysql postgresql sqlite cgroup
		cgroups fsync rmsnorm layernorm webp onnx qwen nvme sram cuda rocm hipcc yaml toml simd gemm gemv gemms wasm`) {
		codeWords[w] = true
	}
}

// codeMarks are characters that code and paths have and prose does not.
const codeMarks = "_/\\={}<>()[]$@#`|"

// nonwordSalad finds English prose of 24 words or more in which 8 distinct
// bare lower-case words or more, a fifth of the words, are no English
// spelling (see isNonword), or 5 and an eighth in a run that does not
// break into sentences (fewer than one in 20 words, see sentences: soup
// runs on, where prose about code that names its tools ends sentences);
// among English function words (one in eight
// words or more: a salad keeps its short words, a list of package names
// has none). Only bare words count (a word with a comma or a colon is an
// item of a list, a command or a key); prose with marks of code in two
// words or more, and one word in ten, is left alone, and so are words the prompt holds and the
// names of commands and functions (codeWords).
func nonwordSalad(prose string, toks []string, c textContext) string {
	if len(toks) < 24 || languageOf(prose) != "English" {
		return ""
	}
	prompt := strings.ToLower(c.prompt)
	seen := map[string]bool{}
	var bad []string
	code, function := 0, 0
	for _, t := range toks {
		if isFunctionWord(t) {
			function++
		}
		if strings.ContainsAny(t, codeMarks) || strings.Contains(t, "--") || strings.Contains(t, "::") {
			code++
		}
		if seen[t] || codeWords[t] || strings.Contains(prompt, t) || !isNonword(t) {
			continue
		}
		seen[t] = true
		bad = append(bad, t)
	}
	n := len(bad)
	if code >= 2 && code*10 >= len(toks) {
		// Code, paths or markup in one word of ten: not prose. Two
		// asides in brackets ("(so)", "and/or") do not make it code.
		return ""
	}
	if function*8 < len(toks) || !(n >= 8 && n*5 >= len(toks) || n >= 5 && n*8 >= len(toks) && sentences(prose, toks)*20 < len(toks)) {
		return ""
	}
	shown := bad
	if len(shown) > 4 {
		shown = shown[:4]
	}
	return fmt.Sprintf("word salad: %d of %d words are no word of any language (%s, ...)", len(bad), len(toks), strings.Join(shown, ", "))
}

// sentences counts where text breaks into sentences or lines: a word that
// ends on a full stop, "!" or "?" (a closing quote after it) before a
// word that starts with a letter (capitalised or not: some answer all in
// lower case), and every line after the first with letters.
func sentences(prose string, toks []string) int {
	n := 0
	for i := 1; i < len(toks); i++ {
		prev := strings.TrimRight(toks[i-1], "\"')”’»")
		if strings.HasSuffix(prev, ".") || strings.HasSuffix(prev, "!") || strings.HasSuffix(prev, "?") {
			if r := []rune(strings.TrimLeft(toks[i], "\"'(“‘«")); len(r) > 0 && unicode.IsLetter(r[0]) {
				n++
			}
		}
	}
	lines := 0
	for _, l := range strings.Split(prose, "\n") {
		if strings.ContainsFunc(l, unicode.IsLetter) {
			lines++
		}
	}
	return n + max(lines-1, 0)
}
