package matrix

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzParse: the decoder never panics; a config it accepts expands, and its
// errors always name the file.
func FuzzParse(f *testing.F) {
	f.Add(validConfig)
	f.Add(twoAxes + "[[include]]\nfruit = \"banana\"\n[[exclude]]\nanimal = \"dog\"\n")
	f.Add("[server]\ncommand = [\"{self}\", \"{port}\"]\n[[axis]]\nname = \"a\"\nvalues = [{ name = \"x\", args = [\"{a}\"] }]\n")
	f.Add("reference = { a = \"x\" }\n[[known]]\nmatch = { a = \"y\" }\nverdict = \"crash\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		cfg, err := Parse("fuzz.toml", []byte(src), nil)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "invalid config: fuzz.toml") {
				t.Fatalf("error does not name the file: %q", msg)
			}
			return
		}
		plan, err := cfg.Expand()
		if err != nil {
			return
		}
		for _, c := range plan.Cells {
			cfg.Command(c, Runtime{Self: "bmx", Port: 1})
		}
	})
}

// FuzzShapePrefilter: the literal check that lets most text skip the
// secret-shape expression never turns away a text the expression matches.
func FuzzShapePrefilter(f *testing.F) {
	for _, s := range []string{
		"sk-proj-abcdefghijklmnopqrstu", "x sk-ant-abcdefghijklmnopqrstu", "hf_abcdefghijklmnopqrstuvwx",
		"ghp_abcdefghijklmnopqrstuvwxyz012345", "ghs_abcdefghijklmnopqrstuvwxyz", "gho_abcdefghijklmnopqrstuvwxyz",
		"github_pat_abcdefghijklmnopqrstuvwxyz", "xoxb-1234567890-abcdefghij", "xoxp-1234567890",
		"AUTH=Bearer eyJhbGciOiJIUzI1NiJ9.payload", "BEARER abcdefghij", "bEaReR\tabcdefghij",
		"AKIAABCDEFGHIJKLMNOP", "AIzaabcdefghijklmnopqrstuvwxyz0123456", "--moe-runner-backend flashinfer_cutlass",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if secretShapeRe.MatchString(s) && !mayHoldShape(s) {
			t.Errorf("mayHoldShape(%q) = false, but the expression matches %q", s, secretShapeRe.FindString(s))
		}
	})
}

// FuzzSecretASCIIName: SecretName, which walks a name's words in place,
// says what the words nameWords builds say.
func FuzzSecretASCIIName(f *testing.F) {
	for _, s := range []string{"HF_TOKEN", "apiKey", "APIKey", "HFToken", "--api-key=x", "KEY2", "--max-total-tokens",
		"TOKENIZERS_PARALLELISM", "XAUTHORITY", "a1Key", "x-AUTH", "ssl-keyfile-password", "9token", "tokEN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isASCII(s) {
			return
		}
		if got, want := SecretName(s), secretNameWords(s); got != want {
			t.Errorf("SecretName(%q) = %v, nameWords says %v (words %q)", s, got, want, nameWords(s))
		}
	})
}

// secretNameWords is SecretName through nameWords: the words built and
// lower-cased, then compared.
func secretNameWords(name string) bool {
	for _, w := range nameWords(name) {
		w = strings.TrimRightFunc(w, unicode.IsDigit)
		if slices.Contains(secretWords, w) {
			return true
		}
		for _, suf := range secretSuffixes {
			if strings.HasSuffix(w, suf) {
				return true
			}
		}
	}
	return false
}

// nameWords splits a name into lower-case words at every character that
// is not a letter or digit and where a lower-case letter meets an
// upper-case one ("apiKey": api, key).
func nameWords(name string) []string {
	var words []string
	var b strings.Builder
	prevLower := false
	flush := func() {
		if b.Len() > 0 {
			words = append(words, strings.ToLower(b.String()))
			b.Reset()
		}
	}
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		b.WriteRune(r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return words
}
