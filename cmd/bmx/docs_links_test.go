package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The documents whose links TestDocsLinks checks, relative to the
// repository root: the README, CONTRIBUTING.md and every docs/*.md.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md under %s (%v)", root, err)
	}
	files := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	return files
}

var (
	// mdLink is an inline link or image, [text](target "title"); the text
	// may hold one level of brackets.
	mdLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// anchorDrop is what GitHub drops from a heading to make its anchor.
	anchorDrop = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// mdLinks returns the targets of the links in a Markdown text, outside
// fenced code blocks and code spans, with the line each is on.
func mdLinks(text string) (targets []string, lines []int) {
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			targets = append(targets, m[1])
			lines = append(lines, i+1)
		}
	}
	return targets, lines
}

// mdAnchors returns the anchors GitHub gives a Markdown text's headings:
// lower case, punctuation dropped, spaces to hyphens, a repeated one
// numbered -1, -2, ...
func mdAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// TestDocsLinks checks that every relative link of the README,
// CONTRIBUTING.md and docs/*.md names a file or folder of the repository,
// and every #anchor a heading of the document it points into, and that the
// README links every document of docs/: a file moved or a heading renamed
// must take its links along.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	read := func(rel string) (string, error) {
		if s, ok := texts[rel]; ok {
			return s, nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		texts[rel] = string(data)
		return string(data), err
	}
	files := docFiles(t, root)
	readmeLinks := map[string]bool{}
	checked := 0
	for _, file := range files {
		text, err := read(file)
		if err != nil {
			t.Fatal(err)
		}
		targets, lines := mdLinks(text)
		for i, target := range targets {
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), filepath.FromSlash(path)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", file, lines[i], target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", file, lines[i], target, dest)
					continue
				}
			}
			if file == "README.md" {
				readmeLinks[dest] = true
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into %s, which is not Markdown", file, lines[i], target, dest)
				continue
			}
			destText, err := read(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", file, lines[i], target, err)
				continue
			}
			if !mdAnchors(destText)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, lines[i], target, dest, anchor)
			}
		}
	}
	for _, file := range files {
		if strings.HasPrefix(file, "docs/") && !readmeLinks[file] {
			t.Errorf("README.md does not link %s", file)
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link pattern is broken")
	}
}

// TestDocsLinksFindBreaks checks the checker: a link to a missing file, an
// anchor no heading has and a link in code are told apart from good ones.
func TestDocsLinksFindBreaks(t *testing.T) {
	t.Parallel()
	text := "# Top\n## Sweeping a real GPU host\n## Top\n" +
		"see [a](docs/x.md#top-1), ![img](../y.png \"t\"), [`code`](z.md), `[not](a link)`\n" +
		"```\n[fenced](no.md)\n```\n"
	targets, _ := mdLinks(text)
	if want := []string{"docs/x.md#top-1", "../y.png", "z.md"}; strings.Join(targets, " ") != strings.Join(want, " ") {
		t.Errorf("links %q, want %q", targets, want)
	}
	anchors := mdAnchors(text)
	for _, a := range []string{"top", "top-1", "sweeping-a-real-gpu-host"} {
		if !anchors[a] {
			t.Errorf("no anchor %q in %v", a, anchors)
		}
	}
	if anchors["sweeping-a-real-gpu-host-1"] || anchors["Top"] {
		t.Errorf("anchors that no heading makes: %v", anchors)
	}
}
