package server

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestWatchReadsLogWhoseNameIsGone: the server writes to the log file it
// opened; when the file's name goes (the run directory removed mid-sweep)
// the watcher still reads that file and sees the ready line, rather than
// bmx waiting out the whole ready timeout (minutes on a real host) before
// it finds its store gone. The minute's wait below only bounds a failure.
func TestWatchReadsLogWhoseNameIsGone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "server.log")
	log, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if _, err := log.WriteString("loading weights\n"); err != nil {
		t.Fatal(err)
	}
	w := watchLog(path, regexp.MustCompile(`server is ready`), func([]byte) bool { return false })
	defer w.stop()
	w.sync() // the watcher has read the log once, by its name
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := log.WriteString("the server is ready\n"); err != nil {
		t.Fatal(err)
	}
	w.sync()
	select {
	case <-w.ready:
	case <-time.After(time.Minute):
		t.Fatal("the ready line written after the log's name was removed was never seen")
	}
}
