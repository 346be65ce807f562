package matrix

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestEngineProfiles renders one cell of a config on each engine: the exact
// argv and env a sweep would run (golden files in testdata).
func TestEngineProfiles(t *testing.T) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			src := `engine = "` + engine + `"
[vars]
model = "/models/Qwen3.5-397B-A17B-NVFP4"
tp = "8"
[server]
env = { HF_HOME = "/cache" }
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass"]
[[axis]]
name = "fp4"
env = "VLLM_NVFP4_GEMM_BACKEND"
values = ["flashinfer-cudnn"]
`
			cfg, err := Parse("m.toml", []byte(src), nil)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := cfg.Expand()
			if err != nil {
				t.Fatal(err)
			}
			argv, env := cfg.Command(plan.Cells[0], Runtime{Self: "/usr/local/bin/bmx", Port: 31337})
			var b strings.Builder
			b.WriteString("argv: " + ShellJoin(argv) + "\nenv: " + strings.Join(env, " ") + "\n")
			b.WriteString("health: " + cfg.Server.Health + "\nready_log: " + cfg.Server.ReadyLog.String() + "\n")
			b.WriteString("ready_generate: " + map[bool]string{true: "yes", false: "no"}[cfg.Server.ReadyGenerate] + "\n")
			b.WriteString("ready_timeout: " + cfg.Server.ReadyTimeout.String() + "\nhelp: " + ShellJoin(cfg.Render(cfg.Server.HelpCommand, Runtime{Self: "/usr/local/bin/bmx"})) + "\n")
			path := filepath.Join("testdata", "TestEngineProfiles", engine+".golden")
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				os.WriteFile(path, []byte(b.String()), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./internal/matrix -update)", err)
			}
			if d := cmp.Diff(string(want), b.String()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	if _, err := Parse("m.toml", []byte("engine = \"tgi\"\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\"]\n"), nil); err == nil || !strings.Contains(err.Error(), `m.toml:1: engine: unknown engine "tgi"`) {
		t.Errorf("got %v", err)
	}
}

func TestStarters(t *testing.T) {
	for _, engine := range Engines {
		text, err := Starter(StarterOptions{Engine: engine, TP: 4})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Parse(engine+".toml", []byte(text), nil)
		if err != nil {
			t.Fatalf("%s starter: %v", engine, err)
		}
		if _, err := cfg.Expand(); err != nil {
			t.Fatalf("%s starter: %v", engine, err)
		}
		if cfg.Vars["tp"] != "4" || !cfg.HelpCheck || cfg.Engine != engine {
			t.Errorf("%s: vars %v help_check %v", engine, cfg.Vars, cfg.HelpCheck)
		}
	}
	if _, err := Starter(StarterOptions{Engine: "sglang", TP: 0}); err == nil {
		t.Error("tp 0 accepted")
	}
}
