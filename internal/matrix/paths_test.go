package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLooksLocal(t *testing.T) {
	for v, want := range map[string]bool{
		"/models/Qwen3-30B":           true,
		"./models/q":                  true,
		"../q":                        true,
		"~/models/q":                  true,
		"models/qwen/Qwen3-30B":       true, // two slashes: no Hugging Face id
		"q4.gguf":                     true,
		"Qwen/Qwen3-30B":              false,
		"simulated/Qwen3.5-397B-A17B": false,
		"gpt2":                        false,
		"https://example.com/a/b/c":   false,
		"{dir}/m":                     false,
		"":                            false,
	} {
		if got := LooksLocal(v); got != want {
			t.Errorf("LooksLocal(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestMissingPaths: model and tokenizer vars that look local, vars named by
// server.paths, {dir} files and --model-path values are checked; a Hugging
// Face id and paths that exist are not reported.
func TestMissingPaths(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "present"), 0o755)
	os.WriteFile(filepath.Join(dir, "serve.sh"), nil, 0o755)
	src := `[vars]
model = "` + dir + `/no-model"
tokenizer = "Qwen/Qwen3-30B"
draft = "draft-model"
present = "` + dir + `/present"
[server]
command = ["{dir}/serve.sh", "{dir}/missing.py", "--model-path", "{model}", "--tokenizer", "{tokenizer}", "--draft", "{draft}", "--port", "{port}"]
paths = ["draft", "present"]
[[axis]]
name = "weights"
flag = "--model"
values = ["` + dir + `/present", "` + dir + `/gone.gguf"]
`
	path := filepath.Join(dir, "m.toml")
	cfg, err := Parse(path, []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range cfg.MissingPaths(plan.Cells) {
		got = append(got, e.Error())
	}
	want := []string{
		path + `:2: vars.model: "` + dir + `/no-model" does not exist (the server is told to load it): fix the path or pass --var model=PATH`,
		path + `:4: vars.draft: "draft-model" does not exist (the server is told to load it): fix the path or pass --var draft=PATH`,
		path + `:7: server.command: "{dir}/missing.py" is ` + dir + `/missing.py, which does not exist ({dir} is the config's directory)`,
		path + `: cell weights=` + dir + `/gone.gguf: --model "` + dir + `/gone.gguf" does not exist (the server is told to load it)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A value --var gave is the flag's, not the config line's it replaced.
	cfg, err = Parse(path, []byte(src), map[string]string{"model": dir + "/other-model", "draft": dir + "/present"})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, e := range cfg.MissingPaths(plan.Cells[:1]) {
		got = append(got, e.Error())
	}
	want = []string{
		path + `: --var model: "` + dir + `/other-model" does not exist (the server is told to load it): fix the path given to --var model`,
		path + `:7: server.command: "{dir}/missing.py" is ` + dir + `/missing.py, which does not exist ({dir} is the config's directory)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("with --var, got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := Parse(path, []byte(strings.Replace(src, `paths = ["draft", "present"]`, `paths = ["draft", "modle"]`, 1)), nil); err == nil ||
		!strings.Contains(err.Error(), `server.paths: "modle" is not a var`) {
		t.Errorf("a server.paths entry that is no var: %v", err)
	}
}
