package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// The tests in this file run bmx as a real process (sweeps need Linux).

// bigMatrix writes a config of n axes of 10 values each.
func bigMatrix(t *testing.T, axes int) string {
	c := matrixtest.Config{Name: "big", Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--port", "{port}"}}}
	for i := range axes {
		a := matrixtest.Axis{Name: fmt.Sprintf("a%d", i), Flag: fmt.Sprintf("--a%d", i)}
		for v := range 10 {
			a.Values = append(a.Values, fmt.Sprintf("v%d", v))
		}
		c.Axes = append(c.Axes, a)
	}
	return c.Write(t, filepath.Join(t.TempDir(), "big.toml"))
}

// TestTooManyCells: a 10^6- and a 10^20-cell matrix are refused before any
// cell is built, in one line that names the axes and the count, by plan and
// by sweep (which creates no run directory); --max-cells raises the limit.
func TestTooManyCells(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		axes  int
		count string
	}{{6, "1000000"}, {20, "100000000000000000000"}} {
		path := bigMatrix(t, tc.axes)
		for _, cmd := range []string{"plan", "sweep"} {
			t.Run(fmt.Sprintf("%s %d axes", cmd, tc.axes), func(t *testing.T) {
				t.Parallel()
				out := t.TempDir()
				args := []string{cmd, "-c", path}
				if cmd == "sweep" {
					args = append(args, "--out", out)
				}
				code, stdout, stderr := runBMX(t, args...)
				if code != ExitUsage || stdout != "" {
					t.Errorf("exit %d, stdout %q", code, stdout)
				}
				want := "the axes span " + tc.count + " cells (a0 10 x a1 10 x "
				if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--max-cells N") {
					t.Errorf("stderr %q, want one line with %q", stderr, want)
				}
				if entries, _ := os.ReadDir(out); len(entries) > 0 {
					t.Errorf("a refused sweep left %d entries in --out", len(entries))
				}
			})
		}
	}
	// The limit's own checks, in this process: a refusal here builds
	// nothing either way.
	path := bigMatrix(t, 3) // 1000 cells
	if code, _, stderr := bmx(t, "plan", "-c", path, "--max-cells", "999"); code != ExitUsage || !strings.Contains(stderr, "more than the limit of 999") {
		t.Errorf("--max-cells 999: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr := bmx(t, "plan", "-c", path, "--max-cells", "1000"); code != ExitOK || !strings.HasPrefix(stdout, "big: 1000 cells") {
		t.Errorf("--max-cells 1000: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := bmx(t, "plan", "-c", path, "--max-cells", "0"); code != ExitUsage || !strings.Contains(stderr, "--max-cells 0: want at least 1") {
		t.Errorf("--max-cells 0: exit %d\n%s", code, stderr)
	}
}

// TestBadInput: each mistake is a usage error (exit 2) that says what is
// wrong, or, for a server that is not there, an infrastructure error (3)
// with the reason; nothing is swept into a directory that is not a run.
func TestBadInput(t *testing.T) {
	t.Parallel()
	notRun := t.TempDir()
	os.WriteFile(filepath.Join(notRun, "notes.txt"), []byte("mine\n"), 0o644)
	strayRun := t.TempDir()
	os.WriteFile(filepath.Join(strayRun, "run.json"), []byte("{}\n"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	badProbes := filepath.Join(t.TempDir(), "probes.toml")
	os.WriteFile(badProbes, []byte("[[probe]]\nname = \"a\"\nprompt = \"x\"\n\n[[probe]]\nname = \"b\"\nprompt = \"y\"\ntemperature = 3.0\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"slots 0", []string{"sweep", "--slots", "0"}, ExitUsage, "--slots 0: want at least 1"},
		{"resume a plain directory", []string{"sweep", "--resume", notRun}, ExitUsage, notRun + " is not a bmx run directory: it has no run.json"},
		{"resume a plain directory, forced", []string{"sweep", "--resume", notRun, "--force"}, ExitUsage, "it has no run.json"},
		{"resume a stray run.json, forced", []string{"sweep", "--resume", strayRun, "--force"}, ExitUsage, "its run.json does not describe a run"},
		{"resume nothing", []string{"sweep", "--resume", filepath.Join(notRun, "nope")}, ExitUsage, "it does not exist"},
		{"report a plain directory", []string{"report", notRun}, ExitUsage, notRun + " is not a bmx run directory: it has no run.json"},
		{"report a stray run.json", []string{"report", strayRun}, ExitUsage, "its run.json does not describe a run"},
		{"report a file", []string{"report", filepath.Join(notRun, "notes.txt")}, ExitUsage, "it is a file"},
		{"probe not a URL", []string{"probe", "--url", "notaurl"}, ExitUsage, `--url "notaurl": want an http:// or https:// URL`},
		{"probe no host", []string{"probe", "--url", "http://"}, ExitUsage, "no host"},
		{"probe nobody there", []string{"probe", "--url", closed}, ExitInfra, "cannot reach the server at " + closed + ": dial tcp"},
		{"probe file error", []string{"probe", "--url", closed, "--probes", badProbes}, ExitUsage, badProbes + `:8: probe #2 "b".temperature: temperature 3: want 0 to 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runBMX(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant %q", code, tt.code, stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
	for _, dir := range []string{notRun, strayRun} {
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s: %d entries: something was written into a directory that is not a run", dir, len(entries))
		}
	}
}

// TestSecretsNeverWritten gives bmx a secret in every form and place
// (matrixtest.Secrets: a server that prints them all), then greps every file
// of the run, every report format, plan's output and bmx's stdout and
// stderr for them.
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sc := matrixtest.Secrets()
	// Its sim on the SM120 profile's faster clock (a start-up of 50 ms,
	// not 700).
	prof := matrixtest.WriteFile(t, filepath.Join(dir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	script := &sc.Config.Server.Command[2]
	if fast := strings.Replace(*script, `--port "$2"`, `--port "$2" --sim-profile `+prof, 1); fast != *script {
		*script = fast
	} else {
		t.Fatalf("matrixtest.Secrets' server no longer runs sim-server ... --port \"$2\": %s", *script)
	}
	// One probe and a small performance probe: secrets have no part in
	// what the cells answer, but the performance section names each
	// cell's flags, the secret --auth-token among them.
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), oneProbeSmallPerf)
	sc.Config.Tail += "[probes]\nfile = \"probes.toml\"\n"
	path := sc.Config.Write(t, filepath.Join(dir, "m.toml"))
	var vars []string
	for k, v := range sc.Vars {
		vars = append(vars, "--var", k+"="+v)
	}
	out := filepath.Join(dir, "runs")
	code, stdout, stderr := runBMXEnv(t, sc.Environ, append([]string{"sweep", "-c", path, "--out", out}, vars...)...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	run := runDir(t, out)
	texts := map[string]string{"sweep stdout": stdout, "sweep stderr": stderr}
	// The reports are made in this process: what they write is the same
	// code's as a bmx process's, at a sixth of the process starts.
	for _, format := range []string{"table", "md", "html", "json", "csv", "junit"} {
		code, stdout, stderr := bmx(t, "report", run, "--format", format)
		if code != ExitOK {
			t.Fatalf("report --format %s: exit %d\n%s", format, code, stderr)
		}
		texts["report --format "+format] = stdout + stderr
	}
	_, planOut, planErr := runBMXEnv(t, sc.Environ, append([]string{"plan", "-c", path}, vars...)...)
	texts["plan"] = planOut + planErr
	// A resume is given the secret --var again (run.json does not keep
	// it); its cells are done, so it only rewrites run.json and the reports.
	code, stdout, stderr = runBMXEnv(t, sc.Environ, append([]string{"sweep", "--resume", run}, vars...)...)
	if code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	texts["resume stdout"], texts["resume stderr"] = stdout, stderr
	files := 0
	filepath.WalkDir(run, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			texts[p] = p + "\n" + string(data) // the name counts too
			files++
		}
		return nil
	})
	if files < 7 { // run.json, results.jsonl, 2 logs, report.md/html/json
		t.Fatalf("only %d files in the run", files)
	}
	// The server did print them: the check is not vacuous.
	logs, _ := filepath.Glob(filepath.Join(run, "logs", "*.log"))
	if len(logs) != 2 || !strings.Contains(texts[logs[0]], "argv: ") || !strings.Contains(texts[logs[0]], "DEPLOY=<redacted>") {
		t.Fatalf("logs %v:\n%s", logs, texts[logs[0]])
	}
	if !strings.Contains(texts["plan"], "--pw '<redacted>'") {
		t.Errorf("plan does not show the --pw placement:\n%s", texts["plan"])
	}
	found := 0
	for where, text := range texts {
		for _, s := range sc.Secrets {
			if n := strings.Count(text, s); n > 0 {
				found += n
				t.Errorf("%s holds %s", where, s)
			}
		}
	}
	t.Logf("%d secrets in %d placements: %d occurrences in %d files and outputs", len(sc.Secrets), len(sc.Secrets), found, len(texts))
}
