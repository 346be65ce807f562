package matrix

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Parse("m.toml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func ids(cells []Cell) []string {
	out := []string{}
	for _, c := range cells {
		out = append(out, c.ID)
	}
	return out
}

const twoAxes = `[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "fruit"
flag = "--fruit"
values = ["apple", "pear"]
[[axis]]
name = "animal"
env = "ANIMAL"
values = ["cat", "dog"]
`

func TestExpandProductOrder(t *testing.T) {
	plan, err := mustParse(t, twoAxes).Expand()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog", "fruit=pear,animal=cat", "fruit=pear,animal=dog"}
	if d := cmp.Diff(want, ids(plan.Cells)); d != "" {
		t.Errorf("cells (-want +got):\n%s", d)
	}
}

// TestExpandIncludeExclude follows GitHub Actions' matrix semantics: excludes
// first; an include extends every remaining combination it matches, or adds a
// cell of its own (which later includes do not extend).
func TestExpandIncludeExclude(t *testing.T) {
	tests := []struct {
		name     string
		extra    string
		cells    []string
		excluded []string
		warnings int
		check    func(t *testing.T, p *Plan)
	}{
		{
			name:     "exclude removes matching cells",
			extra:    "[[exclude]]\nfruit = \"pear\"\nanimal = \"dog\"\n",
			cells:    []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog", "fruit=pear,animal=cat"},
			excluded: []string{"fruit=pear,animal=dog"},
		},
		{
			name:     "exclude on one axis removes a row",
			extra:    "[[exclude]]\nfruit = \"apple\"\n",
			cells:    []string{"fruit=pear,animal=cat", "fruit=pear,animal=dog"},
			excluded: []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog"},
		},
		{
			name:     "exclude that matches nothing warns",
			extra:    "[[exclude]]\nfruit = \"banana\"\n",
			cells:    []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog", "fruit=pear,animal=cat", "fruit=pear,animal=dog"},
			warnings: 1,
		},
		{
			name:  "include extends matching cells",
			extra: "[[include]]\nanimal = \"cat\"\nargs = [\"--purr\"]\nenv = { LOUD = \"1\" }\n",
			cells: []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog", "fruit=pear,animal=cat", "fruit=pear,animal=dog"},
			check: func(t *testing.T, p *Plan) {
				for _, c := range p.Cells {
					cat := strings.Contains(c.ID, "cat")
					if got := strings.Contains(strings.Join(c.Args, " "), "--purr"); got != cat {
						t.Errorf("%s: --purr %v, want %v", c.ID, got, cat)
					}
					if got := c.Env["LOUD"] == "1"; got != cat {
						t.Errorf("%s: LOUD %v, want %v", c.ID, got, cat)
					}
				}
			},
		},
		{
			name:  "include of a new value adds a cell",
			extra: "[[include]]\nfruit = \"banana\"\n[[include]]\nfruit = \"banana\"\nanimal = \"cat\"\n",
			cells: []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog", "fruit=pear,animal=cat", "fruit=pear,animal=dog", "fruit=banana", "fruit=banana,animal=cat"},
			check: func(t *testing.T, p *Plan) {
				c := p.Cells[5]
				if d := cmp.Diff([]string{"--fruit", "banana"}, c.Args); d != "" {
					t.Errorf("args (-want +got):\n%s", d)
				}
				if c.Env["ANIMAL"] != "cat" {
					t.Errorf("env %v", c.Env)
				}
			},
		},
		{
			name:     "include brings back an excluded cell",
			extra:    "[[exclude]]\nfruit = \"pear\"\n[[include]]\nfruit = \"pear\"\nanimal = \"dog\"\n",
			cells:    []string{"fruit=apple,animal=cat", "fruit=apple,animal=dog", "fruit=pear,animal=dog"},
			excluded: []string{"fruit=pear,animal=cat", "fruit=pear,animal=dog"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := mustParse(t, twoAxes+tt.extra).Expand()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.cells, ids(plan.Cells)); d != "" {
				t.Errorf("cells (-want +got):\n%s", d)
			}
			if tt.excluded == nil {
				tt.excluded = []string{}
			}
			if d := cmp.Diff(tt.excluded, ids(plan.Excluded)); d != "" {
				t.Errorf("excluded (-want +got):\n%s", d)
			}
			if len(plan.Warnings) != tt.warnings {
				t.Errorf("warnings %q, want %d", plan.Warnings, tt.warnings)
			}
			if tt.check != nil {
				tt.check(t, plan)
			}
		})
	}
}

func TestExpandDuplicateInclude(t *testing.T) {
	_, err := mustParse(t, twoAxes+"[[include]]\nfruit = \"kiwi\"\n[[include]]\nfruit = \"kiwi\"\n").Expand()
	if err == nil || !strings.Contains(err.Error(), "adds cell fruit=kiwi twice") {
		t.Fatalf("got %v", err)
	}
}

func TestCommand(t *testing.T) {
	src := `[vars]
model = "/m"
[server]
command = ["{self}", "serve", "{model}", "--host", "{host}", "--port", "{port}", "--kw", '{"enable_thinking": true}']
env = { BASE = "{model}" }
[[axis]]
name = "moe"
flag = "--moe"
values = [{ name = "x", args = ["--tp", "{model}"], env = { X = "1" } }]
[[axis]]
name = "gemm"
env = "GEMM"
values = ["g"]
`
	cfg := mustParse(t, src)
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	argv, env := cfg.Command(plan.Cells[0], Runtime{Self: "/bin/bmx", Port: 1234})
	wantArgv := []string{"/bin/bmx", "serve", "/m", "--host", "127.0.0.1", "--port", "1234", "--kw", `{"enable_thinking": true}`, "--moe", "x", "--tp", "/m"}
	if d := cmp.Diff(wantArgv, argv); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"BASE=/m", "GEMM=g", "X=1"}, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	argv, _ = cfg.Command(plan.Cells[0], Runtime{})
	if argv[0] != "{self}" || argv[6] != "{port}" {
		t.Errorf("plan rendering should keep {self} and {port}: %q", argv)
	}
}

func TestFilter(t *testing.T) {
	cfg := mustParse(t, twoAxes)
	plan, _ := cfg.Expand()
	if err := plan.Filter(cfg, []string{"fruit=pear", "animal=cat", "animal=dog"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"fruit=pear,animal=cat", "fruit=pear,animal=dog"}, ids(plan.Cells)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range []string{"nope", "color=red", "fruit=kiwi", "fruit=pear,color=red", "fruit=pear,kiwi"} {
		plan, _ := cfg.Expand()
		if err := plan.Filter(cfg, []string{bad}); err == nil {
			t.Errorf("--only %s: no error", bad)
		}
	}
	// A value the axis does not have is refused with the values it has,
	// and the one meant when it is clear.
	for _, tc := range []struct{ only, want string }{
		{"fruit=kiwi", `--only "fruit=kiwi": axis fruit has no value "kiwi" (values: apple, pear)`},
		{"fruit=pea", `--only "fruit=pea": axis fruit has no value "pea" (values: apple, pear); did you mean pear?`},
		{"animal=dogg", `--only "animal=dogg": axis animal has no value "dogg" (values: cat, dog); did you mean dog?`},
	} {
		t.Run(tc.only, func(t *testing.T) {
			plan, _ := cfg.Expand()
			err := plan.Filter(cfg, []string{tc.only})
			if !errors.Is(err, ErrInvalid) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("got %v, want ...%s", err, tc.want)
			}
		})
	}
	// A cell ID is an --only: comma-separated pairs, in one entry.
	plan, _ = cfg.Expand()
	if err := plan.Filter(cfg, []string{"fruit=pear,animal=cat"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"fruit=pear,animal=cat"}, ids(plan.Cells)); d != "" {
		t.Errorf("cell ID as --only (-want +got):\n%s", d)
	}
}

// TestFilterCommaInValue: a piece that is not "axis=value" continues the
// value before it.
func TestFilterCommaInValue(t *testing.T) {
	cfg := mustParse(t, `[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "quant"
flag = "--q"
values = ["fp8,e4m3", "fp8"]
[[axis]]
name = "tp"
flag = "--tp"
values = ["1", "2"]
`)
	plan, _ := cfg.Expand()
	if err := plan.Filter(cfg, []string{"quant=fp8,e4m3,tp=2"}); err != nil {
		t.Fatal(err)
	}
	if len(plan.Cells) != 1 {
		t.Fatalf("cells %v", ids(plan.Cells))
	}
	if v, _ := plan.Cells[0].Value("quant"); v != "fp8,e4m3" {
		t.Errorf("quant %q, want fp8,e4m3", v)
	}
}

func TestShellJoin(t *testing.T) {
	got := ShellJoin([]string{"python3", "-m", "x", "--kw", `{"a": 1}`, "it's", ""})
	want := `python3 -m x --kw '{"a": 1}' 'it'\''s' ''`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestExamples keeps the shipped example configs valid.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.toml"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", "matrix.toml"))
	files = append(files, more...)
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		cfg, err := LoadFile(f, nil)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := cfg.Expand(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestReferenceAndKnown(t *testing.T) {
	cfg := mustParse(t, "reference = { fruit = \"pear\", animal = \"dog\" }\n"+twoAxes+"[[known]]\nmatch = { fruit = \"apple\" }\nverdict = \"crash\"\nissue = \"https://example.org/1\"\n")
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if plan.Reference != "fruit=pear,animal=dog" || plan.Cells[0].ID != plan.Reference || len(plan.Cells) != 4 {
		t.Errorf("reference %q first %q", plan.Reference, plan.Cells[0].ID)
	}
	if !cfg.Known[0].Matches(plan.Cells[1]) || cfg.Known[0].Matches(plan.Cells[0]) {
		t.Error("known issue matching")
	}
	// --only without the reference keeps it (the cells are judged against
	// it), with one warning that says so.
	if err := plan.Filter(cfg, []string{"fruit=apple"}); err != nil || plan.Reference != "fruit=pear,animal=dog" ||
		len(plan.Cells) != 3 || plan.Cells[0].ID != plan.Reference || len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "runs as well") {
		t.Errorf("filtering out the reference: %v %q %d cells %v", err, plan.Reference, len(plan.Cells), plan.Warnings)
	}
	for src, want := range map[string]string{
		"reference = { fruit = \"kiwi\" }\n" + twoAxes:  "reference {fruit=kiwi} matches 0 cells",
		"reference = { fruit = \"apple\" }\n" + twoAxes: "reference {fruit=apple} matches 2 cells",
	} {
		cfg := mustParse(t, src)
		if _, err := cfg.Expand(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	for src, want := range map[string]string{
		"reference = { color = \"red\" }\n" + twoAxes:                                "m.toml:1: reference.color: no axis named \"color\"",
		twoAxes + "[[known]]\nmatch = { fruit = \"apple\" }\nverdict = \"broken\"\n": "m.toml:13: known.verdict: \"broken\"",
		twoAxes + "[[known]]\nverdict = \"crash\"\n":                                 "m.toml:11: known.match: required",
	} {
		if _, err := Parse("m.toml", []byte(src), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
