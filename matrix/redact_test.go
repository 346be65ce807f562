package matrix

import (
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
