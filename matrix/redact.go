package matrix

import (
	"maps"
	"regexp"
	"strings"
)

// Redacted replaces a secret wherever bmx writes one.
const Redacted = "<redacted>"

var (
	secretNameRe = regexp.MustCompile(`(?i)token|key|secret|password|passwd|auth|credential|bearer`)
	// In a config's text: SECRET_LIKE = "value", "--secret-like", "value"
	// and "--secret-like=value".
	secretAssignRe = regexp.MustCompile(`(?i)(\b[\w.-]*(?:token|key|secret|password|passwd|auth|credential)[\w.-]*\s*=\s*)"[^"\n]*"`)
	secretFlagRe   = regexp.MustCompile(`(?i)("--?[\w-]*(?:token|key|secret|password|passwd|auth|credential)[\w-]*"\s*,\s*)"[^"\n]*"`)
	secretEqFlagRe = regexp.MustCompile(`(?i)(--?[\w-]*(?:token|key|secret|password|passwd|auth|credential)[\w-]*=)[^"'\s,\]]+`)
	// secretShapeRe matches well-known key and token shapes wherever they
	// stand, whatever they are called: OpenAI-style sk-, Hugging Face hf_,
	// GitHub ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_, Slack xox?-, AWS
	// access key ids, Google API keys, and the credential after "Bearer".
	secretShapeRe = regexp.MustCompile(`\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|\bhf_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bxox[abposr]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{30,}|(?i:\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}`)
)

// SecretName reports whether a variable or flag name looks like it holds a
// secret (TOKEN, KEY, SECRET, PASSWORD, AUTH, e.g. HF_TOKEN, --api-key).
func SecretName(name string) bool { return secretNameRe.MatchString(name) }

// SecretShape reports whether s holds a value shaped like a well-known key
// or token (sk-..., hf_..., ghp_..., xoxb-..., "Bearer ...").
func SecretShape(s string) bool { return secretShapeRe.MatchString(s) }

// RedactShapes replaces every key- or token-shaped part of s.
func RedactShapes(s string) string {
	if !strings.ContainsAny(s, "-_") && !strings.Contains(strings.ToLower(s), "bearer") && !strings.Contains(s, "AKIA") && !strings.Contains(s, "AIza") {
		return s
	}
	return secretShapeRe.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(strings.ToLower(m), "bearer") {
			return m[:strings.IndexFunc(m, func(r rune) bool { return r == ' ' || r == '\t' })+1] + Redacted
		}
		return Redacted
	})
}

// RedactEnv hides the values of KEY=value entries whose names look secret,
// and key-shaped values whatever their names.
func RedactEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && SecretName(k) {
			kv = k + "=" + Redacted
		}
		out[i] = RedactShapes(kv)
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
			out[i] = RedactShapes(a)
			continue
		}
		name, _, hasVal := strings.Cut(a, "=")
		if !SecretName(name) {
			out[i] = RedactShapes(a)
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

// RedactVars hides vars whose names look secret or whose values are
// key-shaped.
func RedactVars(vars map[string]string) map[string]string {
	out := maps.Clone(vars)
	for k, v := range out {
		if SecretName(k) || SecretShape(v) {
			out[k] = Redacted
		}
	}
	return out
}

// RedactSource hides secret-looking assignments and flag values in a
// config's text, for the copy a run keeps.
func RedactSource(src string) string {
	src = secretAssignRe.ReplaceAllString(src, `$1"`+Redacted+`"`)
	src = secretFlagRe.ReplaceAllString(src, `$1"`+Redacted+`"`)
	src = secretEqFlagRe.ReplaceAllString(src, `${1}`+Redacted)
	return RedactShapes(src)
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

// RedactText replaces each secret in s, and every key- or token-shaped
// value (see RedactShapes).
func RedactText(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 { // too short to replace without mangling the text
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return RedactShapes(s)
}

// Secret reports whether the axis passes v as a secret: its flag or env name
// looks secret, or v is key-shaped.
func (a Axis) Secret(v string) bool {
	return SecretName(a.Flag) || SecretName(a.Env) || SecretShape(v)
}

// Shown is v as bmx writes it: a secret's stable stand-in
// ("secret-1a2b3c4d"), or v.
func (a Axis) Shown(v string) string {
	if a.Secret(v) {
		return maskSecret(v)
	}
	return v
}

// SecretValues lists the axis values passed as secrets (see Axis.Secret),
// so they can be cut out of everything bmx writes.
func (c *Config) SecretValues() []string {
	var out []string
	for _, a := range c.Axes {
		for _, v := range a.Values {
			if a.Secret(v.Name) {
				out = append(out, v.Name)
			}
		}
	}
	return out
}

// RedactedSource is the config's text as a run keeps it: secret-looking
// assignments and flag values, key shapes and secret axis values hidden.
func (c *Config) RedactedSource() string {
	return RedactText(RedactSource(c.Source), c.SecretValues())
}

// RedactCell is cell as bmx records it: its ID and values already carry
// stand-ins for secrets; its arguments and environment lose secret values
// too (by flag or variable name, by key shape, and by value).
func (c *Config) RedactCell(cell Cell) Cell {
	secrets := c.SecretValues()
	out := cell
	if cell.Args != nil {
		out.Args = RedactArgv(cell.Args)
		for i, a := range out.Args {
			out.Args[i] = RedactText(a, secrets)
		}
	}
	if cell.Env != nil {
		out.Env = make(map[string]string, len(cell.Env))
		for k, v := range cell.Env {
			if SecretName(k) {
				v = Redacted
			}
			out.Env[k] = RedactText(v, secrets)
		}
	}
	return out
}
