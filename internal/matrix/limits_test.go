package matrix

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// bigConfig is a matrix of n axes of v values each.
func bigConfig(n, v int) string {
	var b strings.Builder
	b.WriteString("[server]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n")
	for i := range n {
		fmt.Fprintf(&b, "\n[[axis]]\nname = \"a%d\"\nflag = \"--a%d\"\nvalues = [", i, i)
		for j := range v {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "\"v%d\"", j)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestTooManyCells(t *testing.T) {
	for _, tt := range []struct {
		axes, values int
		count        string
	}{
		{6, 10, "1000000"},
		{20, 10, "100000000000000000000"},
	} {
		cfg, err := Parse("big.toml", []byte(bigConfig(tt.axes, tt.values)), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cfg.Expand()
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%d axes of %d: err %v, want ErrInvalid", tt.axes, tt.values, err)
		}
		msg := err.Error()
		for _, want := range []string{"big.toml", tt.count, "a0 10 x a1 10", "--max-cells", "10000"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("not one line: %q", msg)
		}
	}
	cfg, err := Parse("big.toml", []byte(bigConfig(5, 10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxCells = 100000
	plan, err := cfg.Expand()
	if err != nil || len(plan.Cells) != 100000 {
		t.Fatalf("raised limit: %v, %d cells", err, len(plan.Cells))
	}
}

func BenchmarkRefuseHugeMatrix(b *testing.B) {
	cfg, err := Parse("big.toml", []byte(bigConfig(20, 10)), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if _, err := cfg.Expand(); err == nil {
			b.Fatal("not refused")
		}
	}
}

func TestSecretAxisValuesNeverShown(t *testing.T) {
	src := `[server]
command = ["srv", "--port", "{port}", "--api-key=sk-live1234567890abcdefXYZ"]

[[axis]]
name = "token"
env = "MY_TOKEN"
values = ["hunter2-secret-value", "other-secret-value"]

[[axis]]
name = "auth"
flag = "--header"
values = ["Bearer abcdefghijklmnop1234"]
`
	cfg, err := Parse("s.toml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Cells) != 2 || plan.Cells[0].ID == plan.Cells[1].ID {
		t.Fatalf("secret values must stay distinct cells: %+v", plan.Cells)
	}
	for _, cell := range plan.Cells {
		shown := fmt.Sprint(cell.ID, cell.Values)
		for _, secret := range []string{"hunter2", "other-secret", "abcdefghijklmnop1234"} {
			if strings.Contains(shown, secret) {
				t.Errorf("cell shows %q: %s", secret, shown)
			}
		}
		if cell.Env["MY_TOKEN"] == "" || !strings.Contains(strings.Join(cell.Args, " "), "Bearer abcdefghijklmnop1234") {
			t.Errorf("the server must still get the real values: %+v", cell)
		}
		argv, env := cfg.Command(cell, Runtime{Port: 1})
		written := strings.Join(RedactArgv(argv), " ") + strings.Join(RedactEnv(env), " ")
		for _, secret := range []string{"hunter2", "other-secret", "abcdefghijklmnop1234", "sk-live1234567890"} {
			if strings.Contains(written, secret) {
				t.Errorf("redacted command shows %q: %s", secret, written)
			}
		}
	}
	if red := RedactSource(src); strings.Contains(red, "sk-live") || strings.Contains(red, "abcdefghijklmnop1234") {
		t.Errorf("the config snapshot keeps a secret:\n%s", red)
	}
}

func TestSecretShapes(t *testing.T) {
	for _, s := range []string{
		"sk-proj-abcdefghijklmnopqrstu", "hf_abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwxyz012345",
		"xoxb-1234567890-abcdefghij", "AUTH=Bearer eyJhbGciOiJIUzI1NiJ9.payload", "AKIAABCDEFGHIJKLMNOP",
	} {
		if got := RedactText("before "+s+" after", nil); strings.Contains(got, s) || !strings.Contains(got, "before") {
			t.Errorf("RedactText(%q) = %q", s, got)
		}
	}
	for _, fine := range []string{"--moe-runner-backend flashinfer_cutlass", "sk-short", "task-scheduler", "the keyboard"} {
		if got := RedactText(fine, nil); got != fine {
			t.Errorf("RedactText(%q) = %q: not a secret", fine, got)
		}
	}
}

func TestKeyLine(t *testing.T) {
	src := []byte(`name = "probes"

[[probe]]
name = "a"
prompt = "hi"

[[probe]]
name = "b"
temperature = 3.0
`)
	for _, tc := range []struct {
		path []string
		want int
	}{
		{[]string{"probe", "[1]", "temperature"}, 9},
		{[]string{"probe", "[1]", "expect"}, 7}, // not there: its probe's header
		{[]string{"probe", "[0]", "prompt"}, 5},
		{[]string{"probe", "bogus"}, 3}, // an unknown key without index: the first probe
		{[]string{"nothing"}, 0},
	} {
		if got := KeyLine(src, tc.path...); got != tc.want {
			t.Errorf("%v: line %d, want %d", tc.path, got, tc.want)
		}
	}
}

func TestUnknownVar(t *testing.T) {
	src := "[vars]\nmodel = \"/m\"\n[server]\ncommand = [\"srv\", \"--model\", \"{model}\", \"--tok\", \"{tokenizer}\", \"--port\", \"{port}\"]\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\"]\n"
	_, err := Parse("v.toml", []byte(src), map[string]string{"modle": "/other", "tokenizer": "/t"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `--var modle: the config has no variable "modle" (its variables: model, tokenizer)`) {
		t.Errorf("misspelt var: %v", err)
	}
	if _, err := Parse("v.toml", []byte(src), map[string]string{"model": "/other", "tokenizer": "/t"}); err != nil {
		t.Errorf("known vars (one only a placeholder): %v", err)
	}
}
