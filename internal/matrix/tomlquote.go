package matrix

import (
	"encoding/json"
	"regexp"
	"strings"
)

// QuoteTOML quotes s as a TOML basic string, for configs bmx writes for
// users to paste (bmx axes --toml, bmx report --format known): JSON's
// escapes (\" \\ \n \uXXXX ...) are all TOML escapes too.
func QuoteTOML(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// TOMLKey is k as a TOML key: bare when TOML allows it, quoted otherwise.
func TOMLKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return QuoteTOML(k)
}
