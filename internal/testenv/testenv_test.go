package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNeedsShared is run by TestSharedMissing in a child test binary: it
// asks for a file of the shared folder the child's environment names. In
// the parent it does nothing (it is not a test of its own).
func TestNeedsShared(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") != "1" {
		return
	}
	p := Shared(t, "models", "stories260K.gguf")
	t.Logf("found %s", p)
}

// TestSharedMissing runs this test binary again with the shared folder
// pointed at an empty directory: outside CI the test skips naming the path
// and the variable, with CI=true it fails, and with the file present it runs.
func TestSharedMissing(t *testing.T) {
	empty := t.TempDir()
	full := t.TempDir()
	if err := os.MkdirAll(filepath.Join(full, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "models", "stories260K.gguf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(empty, "models", "stories260K.gguf")
	for _, tc := range []struct {
		name, shared, ci string
		exit             int
		out              []string
	}{
		{"missing, not CI", empty, "", 0, []string{"--- SKIP: TestNeedsShared", want + " does not exist", "from BMX_SHARED=" + empty}},
		{"missing, CI=false", empty, "false", 0, []string{"--- SKIP: TestNeedsShared"}},
		{"missing, CI=true", empty, "true", 1, []string{"--- FAIL: TestNeedsShared", want + " does not exist", "CI=true: this test must run in CI"}},
		{"present, CI=true", full, "true", 0, []string{"--- PASS: TestNeedsShared", "found " + filepath.Join(full, "models", "stories260K.gguf")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestNeedsShared$", "-test.v")
			cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", Var+"="+tc.shared, "CI="+tc.ci)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.exit {
				t.Errorf("exit %d, want %d\n%s", code, tc.exit, out)
			}
			for _, w := range tc.out {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestSharedDefault: with BMX_SHARED unset the folder is ../shared beside
// the repository root, and a relative BMX_SHARED is taken from the root.
func TestSharedDefault(t *testing.T) {
	root := Root()
	if root == "" {
		t.Fatal("repository root not found")
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "testenv", "testenv.go")); err != nil {
		t.Fatalf("root %s is not the repository root: %v", root, err)
	}
	t.Setenv(Var, "")
	if got, want := SharedPath("corpus"), filepath.Join(filepath.Dir(root), "shared", "corpus"); got != want {
		t.Errorf("default: %s, want %s", got, want)
	}
	t.Setenv(Var, filepath.Join("testdata", "elsewhere"))
	if got, want := SharedPath("corpus"), filepath.Join(root, "testdata", "elsewhere", "corpus"); got != want {
		t.Errorf("relative %s: %s, want %s", Var, got, want)
	}
}
