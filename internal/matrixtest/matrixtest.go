// Package matrixtest writes the matrix files and simulated-host profiles that
// bmx's sweep tests run, so a test states what its matrix is about (its
// server, its axes, its known issues) and the blocks every matrix repeats
// ([server], [[axis]], a profile's header) are written one way, as a user
// writes them.
package matrixtest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/testenv"
)

// Config is a matrix file. Fields left empty are left out of it.
type Config struct {
	Name string
	// Head is written after the name, verbatim: top-level keys such as
	// reference, dedupe or help_check.
	Head   string
	Vars   map[string]string
	Server Server
	Axes   []Axis
	// Tail is written last, verbatim: [[known]], [[include]], [[exclude]],
	// [probes], [[slot]] tables.
	Tail string
}

// Server is a matrix's [server] table; with no Command there is none (an
// engine profile may give it).
type Server struct {
	Command []string
	Env     map[string]string
	// ReadyTimeout, ProbeTimeout and StopGrace are durations ("6s").
	ReadyTimeout, ProbeTimeout, StopGrace string
	ReadyLog                              string
}

// Axis is an [[axis]] table of plain values: each passes Flag value, or
// sets Env to it.
type Axis struct {
	Name, Flag, Env string
	Values          []string
}

// Sim is the command line of the simulated server (bmx sim-server, which
// is the test binary: {self}) on the host and port bmx gives it, followed
// by args.
func Sim(args ...string) []string {
	return append([]string{"{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}"}, args...)
}

// String is the matrix file's text.
func (c Config) String() string {
	var b strings.Builder
	if c.Name != "" {
		fmt.Fprintf(&b, "name = %s\n", quote(c.Name))
	}
	if c.Head != "" {
		b.WriteString(strings.TrimSuffix(c.Head, "\n") + "\n")
	}
	if len(c.Vars) > 0 {
		b.WriteString("[vars]\n")
		for _, k := range slices.Sorted(maps.Keys(c.Vars)) {
			fmt.Fprintf(&b, "%s = %s\n", k, quote(c.Vars[k]))
		}
	}
	c.Server.write(&b)
	for _, a := range c.Axes {
		a.write(&b)
	}
	b.WriteString(c.Tail)
	return b.String()
}

func (s Server) write(b *strings.Builder) {
	if len(s.Command) == 0 {
		return
	}
	b.WriteString("[server]\ncommand = " + list(s.Command) + "\n")
	if len(s.Env) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			kv = append(kv, k+" = "+quote(s.Env[k]))
		}
		b.WriteString("env = { " + strings.Join(kv, ", ") + " }\n")
	}
	for _, kv := range [][2]string{{"ready_timeout", s.ReadyTimeout}, {"probe_timeout", s.ProbeTimeout}, {"stop_grace", s.StopGrace}, {"ready_log", s.ReadyLog}} {
		if kv[1] != "" {
			b.WriteString(kv[0] + " = " + quote(kv[1]) + "\n")
		}
	}
}

func (a Axis) write(b *strings.Builder) {
	b.WriteString("[[axis]]\nname = " + quote(a.Name) + "\n")
	if a.Flag != "" {
		b.WriteString("flag = " + quote(a.Flag) + "\n")
	}
	if a.Env != "" {
		b.WriteString("env = " + quote(a.Env) + "\n")
	}
	b.WriteString("values = " + list(a.Values) + "\n")
}

// Write writes the matrix to path and returns path.
func (c Config) Write(t testing.TB, path string) string {
	t.Helper()
	return WriteFile(t, path, c.String())
}

// WriteFile writes text to path, creating its directory, and returns path.
func WriteFile(t testing.TB, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Profile is a simulated host's behaviour (bmx sim-server --sim-profile):
// Rules are tried in order, and every combination they do not match works.
type Profile struct {
	Name string
	// Startup is how long the server takes to load and become ready.
	Startup string
	// Body is written after the header, verbatim: [speed], [resolve] and
	// [[rule]] tables.
	Body string
}

// String is the profile file's text.
func (p Profile) String() string {
	return fmt.Sprintf(`name = %s
gpu = "NVIDIA RTX PRO 6000 Blackwell Server Edition (simulated)"
startup = %s
%s
[[rule]]
when = {}
behaviour = "correct"
`, quote(p.Name), quote(p.Startup), p.Body)
}

// Write writes the profile to path and returns path.
func (p Profile) Write(t testing.TB, path string) string {
	t.Helper()
	return WriteFile(t, path, p.String())
}

// SM120 is the text of the simulated SM120 host's own profile (the one bmx
// sweep runs with no config) with its start-up set to startup: the same
// behaviour per backend combination, on a faster clock.
func SM120(t testing.TB, startup string) string {
	t.Helper()
	src := filepath.Join(testenv.Root(), "internal", "launcher", "sim", "profiles", "sm120.toml")
	prof, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(prof), `startup = "700ms"`, "startup = "+quote(startup), 1)
	if out == string(prof) {
		t.Fatalf(`%s no longer says startup = "700ms"`, src)
	}
	return out
}

// SecretCase is a matrix that hands its server a secret in every form and
// place bmx must keep out of what it writes and prints, with what the
// sweep is run with and the secrets themselves.
type SecretCase struct {
	Config Config
	// Vars are the sweep's --var pairs.
	Vars map[string]string
	// Environ is added to bmx's own environment (KEY=value), which its
	// servers inherit.
	Environ []string
	// Secrets are the values that must never be written nor printed.
	Secrets []string
}

// Secrets is the SecretCase of every placement: a --flag=value and a
// --flag value api key, "Bearer" in the server's env, an env axis named
// like a token, a [vars] secret passed to the server under a secret flag,
// under a harmless flag (--tok {api_token}) and under a harmless env name
// (DBG = "{api_token}"), a --var secret under a harmless flag (--pw
// {password}), a key-shaped value under a harmless name, a flag axis named
// like a token, a URL's password in the command and in a var passed
// through the env, and a secret-named variable of bmx's own environment.
// Its server prints its argv and environment, then starts the simulated
// server.
func Secrets() SecretCase {
	secrets := []string{
		"sk-EQUALSFORMab12cd34ef56gh78",  // --api-key=...
		"sk-SPACEFORMab12cd34ef56gh78ij", // --api-key ...
		"sk-BEARERab12cd34ef56gh78ij90",  // AUTH="Bearer ..."
		"tokvalue-AAAA-1234",             // MY_TOKEN axis value
		"tokvalue-BBBB-5678",             // MY_TOKEN axis value
		"varsecret-CCCC-9012",            // [vars] hf_token
		"hf_HUGGINGFACEab12cd34ef56",     // a key-shaped value under a harmless name
		"flagvalue-DDDD-3456",            // a flag axis named like a token
		"apitok-EEEE-7890",               // [vars] api_token as --tok and DBG
		"pwvalue-FFFF-1234",              // --var password=... as --pw
		"urlpass-GGGG-3456",              // https://bob:...@ in the command
		"urlvar-HHHH-7890",               // https://amy:...@ in [vars] mirror_url, as MIRROR_URL
		"envsecret-IIII-1234",            // BMX_TEST_DEPLOY_TOKEN in bmx's environment
	}
	script := `echo "argv: $*"; echo "env: AUTH=$AUTH MY_TOKEN=$MY_TOKEN MIRROR=$MIRROR DBG=$DBG MIRROR_URL=$MIRROR_URL DEPLOY=$BMX_TEST_DEPLOY_TOKEN"; exec "$1" sim-server --model-path m --port "$2"`
	return SecretCase{
		Config: Config{Name: "secrets",
			Vars: map[string]string{"hf_token": secrets[5], "api_token": secrets[8], "mirror_url": "https://amy:" + secrets[11] + "@mirror.example/m"},
			Server: Server{
				Command: []string{"sh", "-c", script, "sh", "{self}", "{port}", "--api-key=" + secrets[0], "--api-key", secrets[1], "--hf-token", "{hf_token}",
					"--tok", "{api_token}", "--pw", "{password}", "--model-url", "https://bob:" + secrets[10] + "@models.example/m"},
				Env:          map[string]string{"AUTH": "Bearer " + secrets[2], "MIRROR": secrets[6], "DBG": "{api_token}", "MIRROR_URL": "{mirror_url}"},
				ReadyTimeout: "20s", StopGrace: "2s",
			},
			Axes: []Axis{
				{Name: "tok", Env: "MY_TOKEN", Values: secrets[3:5]},
				{Name: "auth", Flag: "--auth-token", Values: secrets[7:8]},
			},
		},
		Vars:    map[string]string{"password": secrets[9]},
		Environ: []string{"BMX_TEST_DEPLOY_TOKEN=" + secrets[12]},
		Secrets: secrets,
	}
}

// quote is a TOML basic string.
func quote(s string) string { return strconv.Quote(s) }

func list(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
