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
