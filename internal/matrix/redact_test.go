package matrix

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRedact(t *testing.T) {
	env := RedactEnv([]string{"HF_TOKEN=hf_abc", "CUDA_VISIBLE_DEVICES=0", "OPENAI_API_KEY=sk-1", "DB_PASSWORD=x"})
	if d := cmp.Diff([]string{"HF_TOKEN=<redacted>", "CUDA_VISIBLE_DEVICES=0", "OPENAI_API_KEY=<redacted>", "DB_PASSWORD=<redacted>"}, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	argv := RedactArgv([]string{"python3", "-m", "sglang.launch_server", "--api-key", "sk-2", "--hf-token=hf_x", "--port", "30000", "--model", "m"})
	if d := cmp.Diff([]string{"python3", "-m", "sglang.launch_server", "--api-key", "<redacted>", "--hf-token=<redacted>", "--port", "30000", "--model", "m"}, argv); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	if v := RedactVars(map[string]string{"model": "/m", "hf_token": "hf_y"}); v["model"] != "/m" || v["hf_token"] != Redacted {
		t.Errorf("vars %v", v)
	}
	src := RedactSource("[server]\ncommand = [\"srv\", \"--api-key\", \"sk-3\"]\nenv = { HF_TOKEN = \"hf_z\", CUDA_LAUNCH_BLOCKING = \"1\" }\n")
	for _, secret := range []string{"sk-3", "hf_z"} {
		if strings.Contains(src, secret) {
			t.Errorf("%q left in:\n%s", secret, src)
		}
	}
	if !strings.Contains(src, `CUDA_LAUNCH_BLOCKING = "1"`) {
		t.Errorf("non-secret redacted:\n%s", src)
	}
}

func TestSecretName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret bool
	}{
		{"HF_TOKEN", true}, {"OPENAI_API_KEY", true}, {"DB_PASSWORD", true}, {"--api-key", true},
		{"--hf-token", true}, {"api_token", true}, {"password", true}, {"apiKey", true}, {"APIKey", true},
		{"HFToken", true}, {"AWS_SECRET_ACCESS_KEY", true}, {"client_secret", true}, {"--auth-token", true},
		{"AUTH", true}, {"Authorization", true}, {"credentials", true}, {"passwd", true}, {"ssl-keyfile-password", true},
		{"KEY2", true},
		{"--max-total-tokens", false}, {"--max-prefill-tokens", false}, {"--tokenizer-path", false},
		{"TOKENIZERS_PARALLELISM", false}, {"--skip-tokenizer-init", false}, {"--ssl-keyfile", false},
		{"--kv-cache-dtype", false}, {"XAUTHORITY", false}, {"PWD", false}, {"model", false},
		{"CUDA_VISIBLE_DEVICES", false}, {"--port", false},
	} {
		if got := SecretName(tc.name); got != tc.secret {
			t.Errorf("SecretName(%q) = %v, want %v", tc.name, got, tc.secret)
		}
	}
}

func TestURLPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"https://bob:S3CRET-pw@host/x":            "https://bob:<redacted>@host/x",
		"pull git+ssh://git:p4ss@h:22/r and more": "pull git+ssh://git:<redacted>@h:22/r and more",
		"https://:tok-only@host":                  "https://:<redacted>@host",
		"http://host:8080/path":                   "http://host:8080/path",
		"https://user@host/x":                     "https://user@host/x",
	} {
		if got := RedactShapes(in); got != want {
			t.Errorf("RedactShapes(%q) = %q, want %q", in, got, want)
		}
		if got := SecretShape(in); got != (want != in) {
			t.Errorf("SecretShape(%q) = %v", in, got)
		}
	}
}

// TestConfigSecrets: every place a secret can come from is in the run's
// set, and values under names that only look like token counts are not.
func TestConfigSecrets(t *testing.T) {
	src := `[vars]
api_token = "apitok-1111"
mirror = "https://amy:urlvar-2222@mirror/m"
total = "4096"
[server]
command = ["srv", "--port", "{port}", "--tok", "{api_token}", "--pw", "{password}", "--key={k}", "--max-total-tokens", "{total}", "--model-url", "https://bob:urlpass-3333@h/m"]
env = { DBG = "{api_token}", MIRROR_URL = "{mirror}", HF_TOKEN = "literal-4444", TOKENIZERS_PARALLELISM = "false" }
[[axis]]
name = "tok"
env = "MY_TOKEN"
values = ["axis-5555"]
[[axis]]
name = "a"
flag = "--a"
values = [{ name = "x", args = ["--admin-key", "valarg-6666"], env = { SECRET_X = "valenv-7777" } }]
[[include]]
a = "x"
args = ["--bearer", "incarg-8888"]
`
	cfg, err := Parse("s.toml", []byte(src), map[string]string{"password": "pw-9999", "k": "keyvar-0000"})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Secrets([]string{"BMX_DEPLOY_TOKEN=envsecret-1212", "HOME=/home/x", "TOKENIZERS_PARALLELISM=true", "AUTH_MODE=none"}).Values()
	want := []string{"apitok-1111", "urlvar-2222", "pw-9999", "keyvar-0000", "urlpass-3333", "literal-4444", "axis-5555",
		"valarg-6666", "valenv-7777", "incarg-8888", "envsecret-1212", "https://amy:urlvar-2222@mirror/m"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%q is not among the run's secrets %q", w, got)
		}
	}
	for _, not := range []string{"4096", "false", "true", "/home/x", "srv", "none"} {
		if slices.Contains(got, not) {
			t.Errorf("%q is taken for a secret: %q", not, got)
		}
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	secrets := cfg.Secrets(nil)
	argv, env := cfg.Command(plan.Cells[0], Runtime{Port: 1})
	written := strings.Join(secrets.Argv(argv), " ") + " " + strings.Join(secrets.Env(env), " ") + " " + cfg.RedactedSource()
	for _, w := range want[:10] {
		if strings.Contains(written, w) {
			t.Errorf("%q written:\n%s", w, written)
		}
	}
	if !strings.Contains(written, "--max-total-tokens 4096") || !strings.Contains(written, "TOKENIZERS_PARALLELISM=false") {
		t.Errorf("a value that is no secret is hidden:\n%s", written)
	}
	if v := secrets.Vars(cfg.Vars); v["mirror"] != Redacted || v["total"] != "4096" || v["password"] != Redacted {
		t.Errorf("vars as recorded: %v", v)
	}
}

// TestRedactAll: every string of a value, however deep, loses the secrets;
// the value given is not changed, and named string types are left alone.
func TestRedactAll(t *testing.T) {
	type kind string
	type inner struct {
		Text  string
		Kind  kind
		Bytes []byte
	}
	type outer struct {
		Name   string
		List   []string
		Map    map[string]string
		Ptr    *inner
		Inner  inner
		Any    any
		Arr    [2]string
		hidden string
	}
	in := outer{
		Name: "a S3CRET-1 b", List: []string{"ok", "S3CRET-1"}, Map: map[string]string{"S3CRET-1": "v S3CRET-1"},
		Ptr: &inner{Text: "x S3CRET-1", Kind: "S3CRET-1", Bytes: []byte("S3CRET-1")}, Inner: inner{Text: "S3CRET-1"},
		Any: "S3CRET-1", Arr: [2]string{"S3CRET-1", "fine"}, hidden: "S3CRET-1",
	}
	got := RedactAll(NewSecrets("S3CRET-1"), in)
	want := outer{
		Name: "a <redacted> b", List: []string{"ok", "<redacted>"}, Map: map[string]string{"S3CRET-1": "v <redacted>"},
		Ptr: &inner{Text: "x <redacted>", Kind: "S3CRET-1", Bytes: []byte("S3CRET-1")}, Inner: inner{Text: "<redacted>"},
		Any: "<redacted>", Arr: [2]string{"<redacted>", "fine"}, hidden: "S3CRET-1",
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(outer{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if in.Name != "a S3CRET-1 b" || in.List[1] != "S3CRET-1" || in.Map["S3CRET-1"] != "v S3CRET-1" || in.Ptr.Text != "x S3CRET-1" {
		t.Errorf("the value given was changed: %+v", in)
	}
	if p := (&inner{Text: "fine"}); RedactAll(NewSecrets("S3CRET-1"), p) != p {
		t.Errorf("a value that holds no secret is copied")
	}
}
