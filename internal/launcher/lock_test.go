//go:build linux

package launcher

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/record"
)

// TestSessionRefusesHeldRun: a resume of a run another bmx holds (here this
// process, through the run's lock) is refused naming the holder's PID,
// before it changes anything of the run: results.jsonl and run.json are as
// they were, and the refused session writes no lock of its own.
func TestSessionRefusesHeldRun(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, crashConfig(t))
	s.Only = []string{"fp4_gemm=flashinfer_cudnn"}
	dir := s.mustRun(t).Dir
	before := map[string]string{}
	for _, f := range []string{record.ResultsFile, record.RunFile} {
		before[f] = string(mustRead(t, filepath.Join(dir, f)))
	}
	lock, err := record.LockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := s.resume(dir)
	_, err = r.run(context.Background())
	var locked *record.LockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("resume of a held run: %v, want a *record.LockedError naming PID %d", err, os.Getpid())
	}
	if errors.As(err, new(*ConfigError)) {
		t.Errorf("a held run is not a config error: %v", err)
	}
	for f, data := range before {
		if got := string(mustRead(t, filepath.Join(dir, f))); got != data {
			t.Errorf("the refused resume changed %s", f)
		}
	}
	if data := mustRead(t, filepath.Join(dir, record.LockFile)); strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the lock file no longer names its holder: %q", data)
	}
	lock.Unlock()
	r = s.resume(dir)
	r.mustRun(t)
	if strings.Contains(r.log.String(), "took over") {
		t.Errorf("a lock released cleanly was taken over:\n%s", r.log)
	}
}

// TestSessionTakesOverStaleLock: the lock file of a bmx that died (its
// PID written, its lock gone with it) is taken over, and the log says so in
// one line.
func TestSessionTakesOverStaleLock(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, crashConfig(t))
	s.Only = []string{"fp4_gemm=flashinfer_cudnn"}
	dir := s.mustRun(t).Dir
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(dead.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, record.LockFile), []byte(pid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.resume(dir)
	r.mustRun(t)
	want := "took over " + dir + " from PID " + pid + ", a bmx that ended without releasing it\n"
	if !strings.Contains(r.log.String(), want) {
		t.Errorf("log does not say %q:\n%s", want, r.log)
	}
	if data := mustRead(t, filepath.Join(dir, record.LockFile)); len(data) != 0 {
		t.Errorf("the lock file after the resume: %q, want it cleared", data)
	}
}
