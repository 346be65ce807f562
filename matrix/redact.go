package matrix

import (
	"maps"
	"regexp"
	"strings"
)

// Redacted replaces a secret wherever bmx writes one.
const Redacted = "<redacted>"

var (
	secretNameRe = regexp.MustCompile(`(?i)token|key|secret|password|passwd`)
	// In a config's text: SECRET_LIKE = "value" and "--secret-like", "value".
	secretAssignRe = regexp.MustCompile(`(?i)(\b[\w.-]*(?:token|key|secret|password)[\w.-]*\s*=\s*)"[^"\n]*"`)
	secretFlagRe   = regexp.MustCompile(`(?i)("--?[\w-]*(?:token|key|secret|password)[\w-]*"\s*,\s*)"[^"\n]*"`)
)

// SecretName reports whether a variable or flag name looks like it holds a
// secret (TOKEN, KEY, SECRET, PASSWORD, e.g. HF_TOKEN, --api-key).
func SecretName(name string) bool { return secretNameRe.MatchString(name) }

// RedactEnv hides the values of KEY=value entries whose names look secret.
func RedactEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && SecretName(k) {
			kv = k + "=" + Redacted
		}
		out[i] = kv
	}
	return out
}

// RedactArgv hides the values of flags whose names look secret, in both the
// "--api-key X" and the "--api-key=X" forms.
func RedactArgv(argv []string) []string {
	out := make([]string, len(argv))
	copy(out, argv)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, hasVal := strings.Cut(a, "=")
		if !SecretName(name) {
			continue
		}
		if hasVal {
			out[i] = name + "=" + Redacted
		} else if i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			out[i+1] = Redacted
			i++
		}
	}
	return out
}

// RedactVars hides vars whose names look secret.
func RedactVars(vars map[string]string) map[string]string {
	out := maps.Clone(vars)
	for k := range out {
		if SecretName(k) {
			out[k] = Redacted
		}
	}
	return out
}

// RedactSource hides secret-looking assignments and flag values in a
// config's text, for the copy a run keeps.
func RedactSource(src string) string {
	src = secretAssignRe.ReplaceAllString(src, `$1"`+Redacted+`"`)
	return secretFlagRe.ReplaceAllString(src, `$1"`+Redacted+`"`)
}

// Secrets lists the values RedactEnv and RedactArgv would hide, so they can
// also be cut out of what a server itself prints.
func Secrets(env, argv []string) []string {
	var out []string
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && SecretName(k) && v != "" {
			out = append(out, v)
		}
	}
	red := RedactArgv(argv)
	for i := range argv {
		if red[i] == argv[i] {
			continue
		}
		if _, v, ok := strings.Cut(argv[i], "="); ok && strings.HasPrefix(argv[i], "-") {
			out = append(out, v)
		} else {
			out = append(out, argv[i])
		}
	}
	return out
}

// RedactText replaces each secret in s.
func RedactText(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 { // too short to replace without mangling the text
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}
