package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/evidence"
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
`)
	set, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Probes) != 4 {
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
