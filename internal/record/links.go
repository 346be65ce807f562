package record

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LinkError means a run directory holds a symbolic link where bmx writes a
// file (or the logs directory): bmx never writes through one. A link planted
// in a shared runs/ folder, or kept in a copied run, would otherwise let the
// next resume empty or overwrite whatever file it points to.
type LinkError struct {
	Path string
	// Target is where the link points ("" when it could not be read).
	Target string
}

func (e *LinkError) Error() string {
	to := ""
	if e.Target != "" {
		to = " (to " + e.Target + ")"
	}
	return fmt.Sprintf("%s is a symbolic link%s where bmx writes a file: bmx does not write through links; remove it, or start a new run", e.Path, to)
}

// CheckLinks returns a *LinkError for the first symbolic link in dir or in
// its logs/, where a run directory bmx made holds none: every file there is
// one bmx writes. dir itself may be a link (runs/latest), as may the folder
// it is in.
func CheckLinks(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "logs")} {
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) && d != dir {
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type()&fs.ModeSymlink != 0 {
				return linkError(filepath.Join(d, e.Name()))
			}
		}
	}
	return nil
}

func linkError(path string) *LinkError {
	target, _ := os.Readlink(path)
	return &LinkError{Path: path, Target: target}
}

// OpenFile is os.OpenFile for a file of a run directory: it never follows
// a symbolic link (O_NOFOLLOW where the OS has it), and says so with a
// *LinkError when path is one.
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|noFollow, perm)
	if err != nil {
		if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
			return nil, linkError(path)
		}
		return nil, err
	}
	return f, nil
}
