package matrix

import (
	"strings"
	"testing"
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

// FuzzSecretASCIIName: the ASCII fast path of SecretName says what the
// general one, through nameWords, says.
func FuzzSecretASCIIName(f *testing.F) {
	for _, s := range []string{"HF_TOKEN", "apiKey", "APIKey", "HFToken", "--api-key=x", "KEY2", "--max-total-tokens",
		"TOKENIZERS_PARALLELISM", "XAUTHORITY", "a1Key", "x-AUTH", "ssl-keyfile-password", "9token", "tokEN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isASCII(s) {
			return
		}
		if got, want := secretASCIIName(s), secretNameWords(s); got != want {
			t.Errorf("secretASCIIName(%q) = %v, nameWords says %v (words %q)", s, got, want, nameWords(s))
		}
	})
}
