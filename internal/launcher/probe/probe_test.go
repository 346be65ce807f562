package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "probes.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFile(t *testing.T) {
	p := writeFile(t, `
[[probe]]
name = "info"
kind = "model-info"

[[probe]]
name = "capital"
prompt = "What is the capital of France?"
expect = { contains = "Paris" }
max_tokens = 32
concurrency = 3

[[probe]]
name = "chat"
messages = [{ role = "system", content = "Be brief." }, { role = "user", content = "What is 2+2?" }]
thinking = true
logprobs = true
expect = { number = 4 }

[[probe]]
name = "story"
prompt = "Once upon a time"

[[probe]]
name = "top"
prompt = "Once upon a time"
top_logprobs = 3

[[probe]]
name = "bare"
prompt = "Once upon a time"
logprobs = true
top_logprobs = 0

[[probe]]
name = "sampled"
prompt = "Once upon a time"
logprobs = true
temperature = 0.7
`)
	set, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Probes) != 7 {
		t.Fatalf("%d probes", len(set.Probes))
	}
	if set.Probes[0].Kind != evidence.ModelInfo {
		t.Errorf("kind %q", set.Probes[0].Kind)
	}
	cap := set.Probes[1]
	if len(cap.Requests) != 3 || cap.MaxTokens != 32 || cap.Requests[2].Expect.Contains != "Paris" {
		t.Errorf("capital: %+v", cap)
	}
	chat := set.Probes[2]
	if !chat.Thinking || !chat.Logprobs || len(chat.Requests[0].Messages) != 2 || *chat.Requests[0].Expect.Number != 4 {
		t.Errorf("chat: %+v", chat)
	}
	if set.Probes[3].Requests[0].Expect != nil || set.Probes[3].MaxTokens != 256 {
		t.Errorf("story: %+v", set.Probes[3])
	}
	// logprobs on a greedy probe implies the default top-k; top_logprobs
	// implies logprobs; 0 turns the candidates off; a sampled probe gets
	// none by default.
	for i, want := range []struct {
		logprobs bool
		k        int
	}{{false, 0}, {false, 0}, {true, DefaultTopLogprobs}, {false, 0}, {true, 3}, {true, 0}, {true, 0}} {
		if p := set.Probes[i]; p.Logprobs != want.logprobs || p.TopLogprobs != want.k {
			t.Errorf("%s: logprobs %v top_logprobs %d, want %v %d", p.Name, p.Logprobs, p.TopLogprobs, want.logprobs, want.k)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := map[string]struct{ body, want string }{
		"unknown key":         {"[[probe]]\nname = \"a\"\nprompt = \"x\"\nexpekt = 1\n", "unknown key probe.expekt"},
		"no prompt":           {"[[probe]]\nname = \"a\"\n", `probe #1 "a": needs a prompt or messages`},
		"two expectations":    {"[[probe]]\nname = \"a\"\nprompt = \"x\"\nexpect = { number = 1, contains = \"1\" }\n", "exactly one of number, contains, regex, exact"},
		"bad regex":           {"[[probe]]\nname = \"a\"\nprompt = \"x\"\nexpect = { regex = \"(\" }\n", "expect.regex"},
		"duplicate name":      {"[[probe]]\nname = \"a\"\nprompt = \"x\"\n[[probe]]\nname = \"a\"\nprompt = \"y\"\n", "used twice"},
		"unknown kind":        {"[[probe]]\nname = \"a\"\nkind = \"embed\"\nprompt = \"x\"\n", `unknown kind "embed"`},
		"no probes":           {"", "no [[probe]] defined"},
		"top_logprobs":        {"[[probe]]\nname = \"a\"\nprompt = \"x\"\ntop_logprobs = 21\n", "top_logprobs 21: want 0 to 20"},
		"prompt and messages": {"[[probe]]\nname = \"a\"\nprompt = \"x\"\nmessages = [{ role = \"user\", content = \"y\" }]\n", "prompt and messages are exclusive"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, tt.body)
			_, err := LoadFile(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("got %v, want it to name %s and say %q", err, p, tt.want)
			}
		})
	}
}
