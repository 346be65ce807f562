//go:build !unix

package record

// noFollow is 0 where the OS has no O_NOFOLLOW (Windows): there only
// CheckLinks, before a run directory is written, keeps bmx off links.
const noFollow = 0
