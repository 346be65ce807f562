package reports

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/bmx-dev/bmx/record"
)

// Report files written at the end of a sweep.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
	JSONFile     = "report.json"
)

// WriteFiles writes report.md, report.html and report.json into the run
// directory.
func WriteFiles(dir string, rep *record.Report) error {
	for _, f := range []struct {
		name   string
		render func(io.Writer, *record.Report) error
	}{{MarkdownFile, Markdown}, {HTMLFile, HTML}, {JSONFile, JSON}} {
		var buf bytes.Buffer
		if err := f.render(&buf, rep); err != nil {
			return fmt.Errorf("render %s: %w", f.name, err)
		}
		if err := record.WriteFile(filepath.Join(dir, f.name), buf.Bytes()); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}
