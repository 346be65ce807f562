package record

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// LockFile is the lock of a run directory. One bmx at a time writes into a
// run (a sweep, a resume, a Slurm task, a merge): two would both append
// results for the same cells, and a resume kills the servers the other one
// is probing, by their marker. The holder keeps an exclusive lock on the
// file (flock; the kernel drops it when the holder dies, however it dies)
// and writes its PID in it, so that a bmx refused can name it.
const LockFile = "bmx.lock"

// LockedError means another live bmx holds the run directory.
type LockedError struct {
	Dir string
	// PID is the holder's; 0 when it could not be read.
	PID int
}

func (e *LockedError) Error() string {
	holder := "another bmx"
	if e.PID > 0 {
		holder = fmt.Sprintf("another bmx (PID %d)", e.PID)
	}
	return fmt.Sprintf("%s is in use by %s: one bmx at a time writes into a run directory", e.Dir, holder)
}

// Lock is a run directory this bmx holds; Unlock releases it.
type Lock struct {
	f *os.File
	// Stale is the PID the lock file named when this bmx took it over: a
	// bmx that died holding the run (0: none did).
	Stale int
}

// LockRunDir takes dir's lock, or returns a *LockedError naming the live
// bmx that holds it. A lock file left by a bmx that died (its lock gone
// with it, its PID still written) is taken over; Lock.Stale names that PID.
// A directory holding a symbolic link where bmx writes (the lock itself,
// results.jsonl, a log) is refused with a *LinkError before anything in it
// is opened: whatever takes the lock writes there next.
func LockRunDir(dir string) (*Lock, error) {
	if err := CheckLinks(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	held, holder, err := tryLockSoon(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if !held {
		f.Close()
		return nil, &LockedError{Dir: dir, PID: holder}
	}
	l := &Lock{f: f, Stale: readPID(f)}
	if err := l.write(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		l.Unlock()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return l, nil
}

// Unlock releases the lock. The PID is cleared first, so that the next bmx
// does not take a clean end for a dead holder. A nil Lock holds nothing.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.write("")
	if cerr := l.f.Close(); err == nil { // closing releases the lock
		err = cerr
	}
	l.f = nil
	return err
}

// write replaces the lock file's content with s.
func (l *Lock) write(s string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(s), 0)
	return err
}

// readPID is the PID written in f; 0 when none is.
func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// tryLockSoon takes f's lock, trying again for a moment while the file
// names no holder; holder is the PID it names when the lock is held. A
// lock released a moment ago can still be held then: a process this bmx
// forks at that moment holds a copy of the descriptor until its exec closes
// it (seen in CI: a resume right after a sweep in a process that starts
// servers beside it was refused, by no PID). A live holder writes its PID
// just after taking the lock, and is refused at once from then on.
func tryLockSoon(f *os.File) (held bool, holder int, err error) {
	for range 20 {
		held, err = tryLock(f)
		if held || err != nil {
			return held, 0, err
		}
		if holder = readPID(f); holder > 0 {
			return false, holder, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false, 0, nil
}
