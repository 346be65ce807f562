package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveHelp is argparse's help of a server with SGLang-like flags: aliases,
// a FILE metavar, a choice list, a store_true flag.
const serveHelp = `usage: sglang serve [-h] --model-path MODEL_PATH [--port PORT]

options:
  -h, --help            show this help message and exit
  --model-path MODEL_PATH, --model MODEL_PATH
                        The path of the model weights.
  --port PORT           The port of the HTTP server.
  --tp-size TP_SIZE, --tp TP_SIZE
                        The tensor parallelism size.
  --reasoning-parser {qwen3,glm45}
                        Specify the parser for reasoning models.
  --moe-runner-backend {auto,triton}
                        Choose the runner backend for MoE.
  --trust-remote-code   Accepted.
  --sim-profile FILE    A behaviour profile (TOML).
  --offset OFFSET       A number.
`

// TestCheckCommand: every flag of the fixed command is read against the
// server's help: a typo (with the flag it was meant to be), a value outside
// the choices, a FILE that is not there, a wrong subcommand are errors; an
// abbreviation argparse accepts, a positional argument, placeholders and a
// negative value are not; a command that does not run the help's program,
// and flags a partial help does not list, are warnings.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(profile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	helpArgv := []string{"{self}", "serve", "--help"}
	for _, tc := range []struct {
		name, command string
		help          []string // the help command; helpArgv when nil
		partial       bool
		errs, warns   []string // substrings, one per error or warning
	}{
		{name: "clean", command: `"{self}", "serve", "{model}", "--model", "{model}", "--port", "{port}", "--tp", "2", "--reasoning-parser", "qwen3", "--trust-remote-code", "--sim-profile", "` + profile + `", "--offset", "-1", "--reasoning=glm45"`},
		{name: "typo", command: `"{self}", "serve", "--port", "{port}", "--reasoning-parsr", "qwen3", "--trust-remote-code"`,
			errs: []string{"--reasoning-parsr is not an option of the installed server (/bin/bmx serve --help); did you mean --reasoning-parser?"}},
		{name: "ambiguous prefix", command: `"{self}", "serve", "--port", "{port}", "--t", "1"`, errs: []string{"--t is not an option"}},
		{name: "choice", command: `"{self}", "serve", "--port={port}", "--reasoning-parser=qwen9"`,
			errs: []string{`--reasoning-parser "qwen9" is not a choice of the installed server (valid: qwen3, glm45)`}},
		{name: "missing file", command: `"{self}", "serve", "--port", "{port}", "--sim-profile", "nope.toml"`,
			errs: []string{`--sim-profile "nope.toml" does not exist`}},
		{name: "wrong subcommand", command: `"{self}", "serv", "--port", "{port}"`,
			errs: []string{"server.command runs /bin/bmx serv, but server.help_command describes /bin/bmx serve: a wrong subcommand or module?"}},
		{name: "another program", command: `"sh", "-c", "exec srv --port {port}"`,
			warns: []string{"server.command does not run /bin/bmx serve (server.help_command without its --help): its fixed flags are not checked"}},
		{name: "partial help", command: `"{self}", "serve", "--port", "{port}", "--max-model-len", "4096", "--enforce-eager"`, partial: true,
			warns: []string{"--max-model-len, --enforce-eager not checked: /bin/bmx serve --help lists only some options"}},
		{name: "wrapped", command: `"env", "-C", "/tmp", "{self}", "serve", "--port", "{port}", "--bogus"`, help: []string{"{self}", "serve", "-h"},
			errs: []string{"--bogus is not an option"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, "[server]\ncommand = ["+tc.command+"]\n[vars]\nmodel = \"m\"\n[[axis]]\nname = \"moe\"\nflag = \"--moe-runner-backend\"\nvalues = [\"triton\"]\n")
			argv := tc.help
			if argv == nil {
				argv = helpArgv
			}
			h := NewHelp(cfg.Render(argv, Runtime{Self: "/bin/bmx"}), serveHelp)
			h.Partial = tc.partial
			errs, warns := cfg.CheckCommand(h, "/bin/bmx")
			for what, got := range map[string][]error{"errors": errs, "warnings": warns} {
				want := tc.errs
				if what == "warnings" {
					want = tc.warns
				}
				if len(got) != len(want) {
					t.Fatalf("%s %v, want %d", what, got, len(want))
				}
				for i, w := range want {
					if !strings.Contains(got[i].Error(), w) {
						t.Errorf("%s[%d] %q, want %q in it", what, i, got[i], w)
					}
				}
			}
		})
	}
}

// TestNewHelp: vLLM's help that names --help=all for the rest is partial;
// an option's metavar and whether it takes a value are read.
func TestNewHelp(t *testing.T) {
	h := NewHelp(nil, serveHelp)
	if h.Partial {
		t.Error("a whole help read as partial")
	}
	if f := h.Flags["--sim-profile"]; !f.Value || f.Metavar != "FILE" {
		t.Errorf("--sim-profile %+v", f)
	}
	if f := h.Flags["--trust-remote-code"]; f.Value {
		t.Errorf("--trust-remote-code takes no value: %+v", f)
	}
	if f := h.Flags["--reasoning-parser"]; !f.Value || len(f.Choices) != 2 {
		t.Errorf("--reasoning-parser %+v", f)
	}
	if !NewHelp(nil, serveHelp+"\nTip: use `vllm serve --help=all` to list every option.\n").Partial {
		t.Error("a help that names --help=all read as whole")
	}
}
