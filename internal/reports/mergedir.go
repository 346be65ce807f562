package reports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/bmx-dev/bmx/internal/record"
)

// ReadMerged reads a merged run directory back: its report and merge.json.
func ReadMerged(dir string) (*Merged, error) {
	rep, err := record.Load(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, MergeFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not a merged run: %w", dir, err)
	}
	var m Merged
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MergeFile), err)
	}
	m.Report = rep
	return &m, nil
}

// WriteMerged writes the merged run into out: results.jsonl (one result a
// cell, so every command that reads runs reads it), duplicates.jsonl,
// run.json, merge.json, every run's logs (hard-linked, or copied where a
// link cannot be made) and, through writeReports, the report files;
// report.md then gets a section on the hosts and which of them ran which
// cell. out must not exist or must hold an earlier merge, which is replaced
// once the new one is complete. An earlier merge is locked while it is
// replaced (a *record.LockedError when another bmx holds it).
//
// m is written once: on the way its results lose their logprob steps, which
// only results.jsonl keeps (record.DropSteps), and a second write of it is
// refused; Merge again to write again.
func WriteMerged(out string, m *Merged, writeReports func(dir string, rep *record.Report) error) error {
	return WriteMergedContext(context.Background(), out, m, writeReports)
}

// ErrMergeInterrupted means ctx ended while a merge was written: nothing
// of it is left, and -o is as it was.
var ErrMergeInterrupted = errors.New("merge interrupted")

// WriteMergedContext is WriteMerged that stops when ctx ends (the user's
// Ctrl-C), with ErrMergeInterrupted, removing what it staged. The merge is
// staged in a hidden directory beside out, locked while it is written; one
// left by a merge that was killed (its lock gone with it) is removed first.
func WriteMergedContext(ctx context.Context, out string, m *Merged, writeReports func(dir string, rep *record.Report) error) error {
	if m.written {
		return errors.New("this merge was written already (its logprob steps are gone from memory): merge the runs again")
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if _, err := os.Stat(out); err == nil {
		if _, err := os.Stat(filepath.Join(out, MergeFile)); err != nil {
			return fmt.Errorf("%s exists and is not an earlier merge: name a new directory", out)
		}
		lock, err := record.LockRunDir(out)
		if err != nil {
			return err
		}
		defer lock.Unlock()
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	removeStaging(out)
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), stagingPrefix(out))
	if err != nil {
		return fmt.Errorf("create merged run: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Locked while staged: a merge beside this one takes a staging
	// directory it cannot lock for a live merge's, and leaves it.
	staged, err := record.LockRunDir(tmp)
	if err != nil {
		return fmt.Errorf("create merged run: %w", err)
	}
	defer staged.Unlock()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := m.write(ctx, tmp, out, writeReports); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if err := os.RemoveAll(out); err != nil {
		return fmt.Errorf("replace the earlier merge: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("create merged run: %w", err)
	}
	return nil
}

// stagingPrefix begins the name of the hidden directory a merge into out
// is staged in.
func stagingPrefix(out string) string { return "." + filepath.Base(filepath.Clean(out)) + ".merging-" }

// stagingUnlocked is how long a staging directory without a lock file is
// left alone: a merge locks its own at once, so one older than that was
// left by a bmx that locked none (before it did) and was killed.
const stagingUnlocked = 10 * time.Second

// removeStaging removes the staging directories of merges into out that
// were killed (SIGKILL, a power cut) before they could remove their own:
// those whose lock no live bmx holds. Otherwise each killed merge left a
// hidden copy of the merged run (its logs too, where they were copied)
// for ever.
func removeStaging(out string) {
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Clean(out)), stagingPrefix(out)+"*"))
	for _, d := range dirs {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d, record.LockFile)); err != nil {
			if st, err := os.Lstat(d); err == nil && time.Since(st.ModTime()) > stagingUnlocked {
				_ = os.RemoveAll(d)
			}
			continue
		}
		lock, err := record.LockRunDir(d)
		if err != nil {
			continue // a live merge's, or one bmx cannot judge: left alone
		}
		_ = lock.Unlock()
		_ = os.RemoveAll(d)
	}
}

// write fills dir, a merge that will be renamed to final. Once the results
// are written, m's results lose their logprob steps (record.DropSteps).
// It stops with ErrMergeInterrupted when ctx ends.
func (m *Merged) write(ctx context.Context, dir, final string, writeReports func(dir string, rep *record.Report) error) error {
	kept, err := m.keepLogs(ctx, dir, final)
	if err != nil {
		return err
	}
	// relog points a result of run i at its logs in the merge.
	relog := func(i int, r record.Result) record.Result {
		if p := kept[i][filepath.Base(r.LogPath)]; p != "" && r.LogPath != "" {
			r.LogPath = p
		}
		r.Attempts = slices.Clone(r.Attempts)
		for j, a := range r.Attempts {
			if p := kept[i][filepath.Base(a.LogPath)]; p != "" && a.LogPath != "" {
				r.Attempts[j].LogPath = p
			}
		}
		return r
	}
	rep := &record.Report{Run: m.Report.Run, Agreement: m.Report.Agreement}
	for _, r := range m.Report.Results {
		rep.Results = append(rep.Results, relog(m.RanOn[r.Cell.ID], r))
	}
	var dups []record.Result
	for _, d := range m.dups {
		dups = append(dups, relog(d.run, d.r))
	}
	if err := record.WriteResults(filepath.Join(dir, record.ResultsFile), rep.Results); err != nil {
		return err
	}
	if len(dups) > 0 {
		if err := record.WriteResults(filepath.Join(dir, DuplicatesFile), dups); err != nil {
			return err
		}
	}
	// What is left to write needs no logprob steps (the numerics they gave
	// are in each result): dropped, they free most of a large merge's
	// memory before three reports render at once.
	m.written = true
	m.Report.DropSteps()
	for _, d := range m.dups {
		d.r.DropSteps()
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if err := record.WriteRun(dir, rep.Run); err != nil {
		return fmt.Errorf("write run.json: %w", err)
	}
	if m.baseline != nil {
		// Read again, the merged run is judged as it is now.
		if err := record.WriteYardstick(dir, m.baseline); err != nil {
			return fmt.Errorf("write %s: %w", record.BaselineFile, err)
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := record.WriteFile(filepath.Join(dir, MergeFile), append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", MergeFile, err)
	}
	if writeReports == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if err := writeReports(dir, rep); err != nil {
		return err
	}
	return m.appendMarkdown(filepath.Join(dir, MarkdownFile))
}

// appendMarkdown adds the hosts and which host ran which cell to report.md.
func (m *Merged) appendMarkdown(path string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := MergeMarkdown(f, m); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// keepLogs links (or copies) each run's logs into dir/logs/<the run
// directory's name>/ and returns, per run, each log's name and its path once
// dir is renamed to final.
func (m *Merged) keepLogs(ctx context.Context, dir, final string) ([]map[string]string, error) {
	kept := make([]map[string]string, len(m.Runs)) // per run: log name -> its path in the merge
	used := map[string]bool{}
	for i, r := range m.Runs {
		kept[i] = map[string]string{}
		label := filepath.Base(filepath.Clean(r.Dir))
		for n := 2; used[label]; n++ {
			label = fmt.Sprintf("%s-%d", filepath.Base(filepath.Clean(r.Dir)), n)
		}
		used[label] = true
		src, dst := filepath.Join(r.Dir, "logs"), filepath.Join(dir, "logs", label)
		entries, err := os.ReadDir(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read logs of %s: %w", r.Dir, err)
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return nil, err
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				return nil, ErrMergeInterrupted
			}
			if !e.Type().IsRegular() {
				continue
			}
			if err := linkOrCopy(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return nil, fmt.Errorf("keep log %s: %w", e.Name(), err)
			}
			kept[i][e.Name()] = filepath.Join(final, "logs", label, e.Name())
		}
	}
	return kept, nil
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
