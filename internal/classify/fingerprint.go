package classify

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"go/scanner"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"sync"
)

// source is this package's code, of which Fingerprint is a hash.
//
//go:embed *.go
var source embed.FS

// Fingerprint names the classifier this bmx judges with: a hash of this
// package's code (every verdict rule is here), comments and formatting left
// out (its tokens), 12 hex digits. Each result records it, so a run judged by another
// classifier says so when it is read again (what `--rejudge` would change is
// then worth showing) instead of passing its verdicts off as this bmx's.
//
// A hash rather than a version number bumped by hand: a rule changed without
// the bump would make old verdicts look current, which is the failure the
// fingerprint is for. Hashing the code rather than the files means a comment
// or a gofmt run changes nothing; a change to the code that changes no verdict
// still changes it, and then reading the run says that re-judging changes
// nothing.
func Fingerprint() string { return fingerprint() }

var fingerprint = sync.OnceValue(func() string { return codeHash(source) })

// codeHash hashes the tokens of the Go files of fsys that are not tests.
func codeHash(fsys fs.FS) string {
	names, err := fs.Glob(fsys, "*.go")
	if err != nil {
		panic(err) // a constant pattern
	}
	slices.Sort(names)
	h := sha256.New()
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			panic(err) // embedded
		}
		// The tokens alone: no comments, no spacing.
		var sc scanner.Scanner
		sc.Init(fset.AddFile(name, -1, len(src)), src, nil, 0)
		h.Write([]byte(name + "\x00"))
		for {
			_, tok, lit := sc.Scan()
			if tok == token.EOF {
				break
			}
			h.Write([]byte(tok.String() + " " + lit + "\x00"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
