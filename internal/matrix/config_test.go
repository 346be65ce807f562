package matrix

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const validConfig = `name = "t"

[vars]
model = "/models/m"

[server]
command = ["python3", "-m", "sglang.launch_server", "--model-path", "{model}", "--host", "{host}", "--port", "{port}"]
env = { CUDA_LAUNCH_BLOCKING = "0" }
ready_timeout = "90s"
probe_timeout = "30s"
ready_log = "ready to roll"

[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["a", "b"]

[[axis]]
name = "fp4"
flag = "--fp4-gemm-backend"
values = [
  "x",
  { name = "y", args = ["--extra"], env = { Y = "1" } },
]
`

func TestParseValid(t *testing.T) {
	cfg, err := Parse("m.toml", []byte(validConfig), map[string]string{"model": "/override"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.ReadyTimeout != 90*time.Second || cfg.Server.ProbeTimeout != 30*time.Second {
		t.Errorf("timeouts %v %v", cfg.Server.ReadyTimeout, cfg.Server.ProbeTimeout)
	}
	if cfg.Server.StopGrace != DefaultStopGrace || cfg.Server.Health != DefaultHealth || cfg.Server.Host != DefaultHost {
		t.Errorf("defaults not applied: %+v", cfg.Server)
	}
	if cfg.Vars["model"] != "/override" {
		t.Errorf("--var did not override: %q", cfg.Vars["model"])
	}
	if cfg.Probes.Set != "smoke" {
		t.Errorf("default probe set %q", cfg.Probes.Set)
	}
	want := []Axis{
		{Name: "moe", Flag: "--moe-runner-backend", Values: []Value{{Name: "a"}, {Name: "b"}}},
		{Name: "fp4", Flag: "--fp4-gemm-backend", Values: []Value{{Name: "x"}, {Name: "y", Args: []string{"--extra"}, Env: map[string]string{"Y": "1"}}}},
	}
	if d := cmp.Diff(want, cfg.Axes); d != "" {
		t.Errorf("axes (-want +got):\n%s", d)
	}
}

// TestParseErrors checks that every kind of config error names the file, the
// line and the key.
func TestParseErrors(t *testing.T) {
	server := "[server]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n"
	axis := "[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\", \"y\"]\n"
	tests := []struct {
		name, src, want string
	}{
		{"unknown top-level key", "nmae = \"x\"\n" + server + axis, "m.toml:1: nmae: unknown key"},
		{"unknown server key", server + "readytimeout = \"5s\"\n" + axis, "m.toml:3: server.readytimeout: unknown key"},
		{"unknown axis key", server + axis + "valuez = 1\n", "m.toml:7: axis.valuez: unknown key"},
		{"unknown key in a value table", server + "[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\n  \"x\",\n  { name = \"y\", argz = [\"1\"] },\n]\n", "m.toml:8: axis.values.argz: unknown key"},
		{"wrong type", server + "ready_timeout = 5\n" + axis, "m.toml:3: server.ready_timeout: incompatible types"},
		{"wrong type of values", server + "[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = \"x\"\n", "m.toml:6: axis.values: incompatible types"},
		{"empty axis", server + "[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = []\n", "m.toml:6: axis.values: axis \"a\" is empty"},
		{"duplicate value", server + "[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\n  \"x\",\n  \"x\",\n]\n", "m.toml:8: axis.values: axis \"a\" has the value \"x\" more than once"},
		{"duplicate axis", server + axis + axis, "m.toml:8: axis.name: axis \"a\" is defined twice"},
		{"undefined placeholder", "[server]\ncommand = [\"srv\", \"--model\", \"{model}\"]\n" + axis, "m.toml:2: server.command: undefined placeholder {model}"},
		{"undefined placeholder in value args", server + "[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [{ name = \"x\", args = [\"{nope}\"] }]\n", "m.toml:6: axis.values.args: undefined placeholder {nope}"},
		{"malformed duration", server + "probe_timeout = \"5 minutes\"\n" + axis, "m.toml:3: server.probe_timeout: malformed duration \"5 minutes\""},
		{"negative duration", server + "stop_grace = \"-1s\"\n" + axis, "m.toml:3: server.stop_grace: malformed duration"},
		{"bad ready_log", server + "ready_log = \"(\"\n" + axis, "m.toml:3: server.ready_log: bad regexp"},
		{"missing command", "[server]\nhealth = \"/health\"\n" + axis, "m.toml:1: server.command: required"},
		{"no axis", server, "m.toml: axis: no [[axis]] defined"},
		{"flag and env", server + "[[axis]]\nname = \"a\"\nflag = \"--a\"\nenv = \"A\"\nvalues = [\"x\"]\n", "m.toml:6: axis.env: axis \"a\" sets both flag and env"},
		{"exclude unknown axis", server + axis + "[[exclude]]\nb = \"x\"\n", "m.toml:8: exclude.b: no axis named \"b\""},
		{"include unknown axis", server + axis + "[[include]]\nb = \"x\"\n", "m.toml:8: include.b: no axis named \"b\""},
		{"include wrong type", server + axis + "[[include]]\na = 3\n", "m.toml:8: include.a: must be a non-empty string, got integer 3"},
		{"probe set and file", server + axis + "[probes]\nset = \"smoke\"\nfile = \"p.toml\"\n", "m.toml:9: probes: set and file are exclusive"},
		{"syntax error", server + "values = [\n", "m.toml:3"},
		{"reserved var", "[vars]\nport = \"1\"\n" + server + axis, "m.toml:2: vars.port: \"port\" is filled in by bmx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("m.toml", []byte(tt.src), nil)
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

// TestDuplicateValueOnce: a value repeated three times is one error (at
// its second place), not one per repeat.
func TestDuplicateValueOnce(t *testing.T) {
	src := "[server]\ncommand = [\"s\"]\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\", \"y\", \"x\", \"x\", \"y\"]\n"
	_, err := Parse("m.toml", []byte(src), nil)
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), "more than once"); n != 2 || !strings.Contains(err.Error(), `the value "x" more than once`) || !strings.Contains(err.Error(), `the value "y" more than once`) {
		t.Errorf("%d errors of repeats, want one for x and one for y:\n%v", n, err)
	}
}

func TestParseReportsAllErrors(t *testing.T) {
	src := "[server]\ncommand = [\"{a}\"]\nready_timeout = \"x\"\n[[axis]]\nname = \"n\"\nvalues = []\n"
	_, err := Parse("m.toml", []byte(src), nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"m.toml:2: server.command", "m.toml:3: server.ready_timeout", "m.toml:6: axis.values"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile("does-not-exist.toml", nil)
	if err == nil || !strings.Contains(err.Error(), "does-not-exist.toml") {
		t.Fatalf("got %v", err)
	}
}

func TestLocator(t *testing.T) {
	src := `# comment with = sign
name = "x"
[server]
command = ["a", "b"]   # trailing
[[axis]]
name = "one"
values = [
  "v1",
  { name = "v2", args = ["--x"] },
]
[[axis]]
name = "two"
"quoted key" = 1
`
	l := newLocator(src)
	tests := []struct {
		path []string
		want int
	}{
		{[]string{"name"}, 2},
		{[]string{"server", "command"}, 4},
		{[]string{"axis", "[0]", "name"}, 6},
		{[]string{"axis", "[1]", "name"}, 12},
		{[]string{"axis", "[0]", "values", "[1]"}, 9},
		{[]string{"axis", "[0]", "values", "[1]", "args"}, 9},
		{[]string{"axis", "[1]", "quoted key"}, 13},
		{[]string{"axis", "name"}, 6},
		{[]string{"server", "nothing"}, 3},
	}
	for _, tt := range tests {
		if got := l.line(tt.path...); got != tt.want {
			t.Errorf("line(%v) = %d, want %d", tt.path, got, tt.want)
		}
	}
}

func TestBuiltin(t *testing.T) {
	cfg, err := Builtin(nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Cells) != 12 {
		t.Fatalf("%d cells, want 12", len(plan.Cells))
	}
	argv, _ := cfg.Command(plan.Cells[0], Runtime{Self: "/bin/bmx", Port: 4242})
	got := strings.Join(argv, " ")
	for _, want := range []string{"/bin/bmx sim-server", "--port 4242", "--moe-runner-backend flashinfer_cutlass", "--fp4-gemm-backend flashinfer_cudnn", "--reasoning-parser qwen3"} {
		if !strings.Contains(got, want) {
			t.Errorf("argv %q lacks %q", got, want)
		}
	}
}
