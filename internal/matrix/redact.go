package matrix

import (
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret wherever bmx writes one.
const Redacted = "<redacted>"

var (
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
	// urlCredRe matches the password of a URL's user information
	// (https://user:PASSWORD@host): $1 is what comes before it, $2 the
	// password itself.
	urlCredRe = regexp.MustCompile(`(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:"'<>]*:)([^\s/?#@"'<>]+)@`)
)

// secretSuffixes end the words of secret names: HF_TOKEN, apiKey,
// client_secret, DB_PASSWORD, credentials.
var secretSuffixes = []string{"token", "key", "keys", "secret", "secrets", "password", "passwd", "passphrase", "credential", "credentials"}

// secretWords are whole words of secret names.
var secretWords = []string{"auth", "oauth", "authorization", "bearer"}

// SecretName reports whether a variable or flag name looks like it holds a
// secret: one of its words (split at punctuation and at camelCase) ends in
// token, key, secret, password, passwd, passphrase or credential(s), or is
// auth, oauth, authorization or bearer. HF_TOKEN, --api-key, apiKey and
// DB_PASSWORD are secret names; --max-total-tokens, --tokenizer-path,
// TOKENIZERS_PARALLELISM and --ssl-keyfile are not, so that their values
// (a token count, a path) are never taken for secrets and cut out of all
// that bmx writes.
func SecretName(name string) bool {
	secret := false
	eachNameWord(name, func(w string) bool {
		if !isASCII(w) {
			w = strings.ToLower(w)
		}
		secret = secretWord(strings.TrimRightFunc(w, unicode.IsDigit)) // KEY2 as KEY
		return !secret
	})
	return secret
}

// secretWord is what SecretName asks of each word: w is ASCII in any case,
// or lower-cased.
func secretWord(w string) bool {
	for _, sw := range secretWords {
		if strings.EqualFold(w, sw) {
			return true
		}
	}
	for _, suf := range secretSuffixes {
		if len(w) >= len(suf) && strings.EqualFold(w[len(w)-len(suf):], suf) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// eachNameWord calls yield with each word of name, split at every character
// that is not a letter or digit and where a lower-case letter or a digit
// meets an upper-case one ("apiKey": api, Key), until yield returns false.
// The words are name's own substrings, not copies: a plan or a sweep asks
// SecretName of every flag of every cell.
func eachNameWord(name string, yield func(w string) bool) {
	start, prevLower := 0, false
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			if i > start && !yield(name[start:i]) {
				return
			}
			start, prevLower = i+n, false
			i += n
			continue
		case unicode.IsUpper(r) && prevLower:
			if !yield(name[start:i]) {
				return
			}
			start = i
		}
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		i += n
	}
	if start < len(name) {
		yield(name[start:])
	}
}

// SecretShape reports whether s holds a value shaped like a well-known key
// or token (sk-..., hf_..., ghp_..., xoxb-..., "Bearer ...") or a URL with
// a password (https://user:password@host).
func SecretShape(s string) bool {
	return mayHoldShape(s) && secretShapeRe.MatchString(s) || strings.Contains(s, "://") && urlCredRe.MatchString(s)
}

// mayHoldShape is false when s holds none of the literals that every match
// of secretShapeRe has ("sk-", "hf_", "gh?_", "_pat_", "xox", "AKIA",
// "AIza", "bearer" in any case): most text bmx writes (a flag, a path, an
// argv) is then passed without running the expression, which cost a plan
// of 10^6 cells a quarter of its time. It looks at each byte that can
// start one of them.
func mayHoldShape(s string) bool {
	for i := 0; i < len(s); i++ {
		rest := s[i:]
		for _, lit := range shapeStarts[s[i]] {
			if strings.HasPrefix(rest, lit) {
				return true
			}
		}
		if s[i] == 'g' && len(rest) >= 4 && rest[1] == 'h' && rest[3] == '_' && strings.IndexByte("pousr", rest[2]) >= 0 {
			return true
		}
		if s[i]|0x20 == 'b' && len(rest) >= 6 && strings.EqualFold(rest[:6], "bearer") {
			return true
		}
	}
	return false
}

// shapeStarts are the case-sensitive literals of secretShapeRe by their
// first byte, but gh[pousr]_ and bearer (any case), which mayHoldShape
// checks itself.
var shapeStarts = [256][]string{'s': {"sk-"}, 'h': {"hf_"}, '_': {"_pat_"}, 'x': {"xox"}, 'A': {"AKIA", "AIza"}}

// urlPasswords lists the passwords of the URLs in s.
func urlPasswords(s string) []string {
	if !strings.Contains(s, "://") {
		return nil
	}
	var out []string
	for _, m := range urlCredRe.FindAllStringSubmatch(s, -1) {
		out = append(out, m[2])
	}
	return out
}

// RedactShapes replaces every key- or token-shaped part of s, and the
// password of every URL in it.
func RedactShapes(s string) string {
	if strings.Contains(s, "://") {
		s = urlCredRe.ReplaceAllString(s, "${1}"+Redacted+"@")
	}
	if !mayHoldShape(s) {
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

// CommandSecrets lists the values RedactEnv and RedactArgv would hide in a
// server's environment and command line, so they can also be cut out of
// what the server itself prints.
func CommandSecrets(env, argv []string) []string {
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
		if len(v) >= minSecret {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return RedactShapes(s)
}

// minSecret is the shortest value replaced wherever it stands: a shorter
// one cannot be replaced without mangling the text around it.
const minSecret = 4

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

// Secrets is the set of secret values of a run: each is cut out of
// everything bmx writes or prints (results, logs, run.json, plans,
// reports), wherever the value went: a {placeholder} of a secret var
// passed under a harmless flag or env name is a secret all the same. The
// zero and the nil set hold none; Text still hides key shapes and URL
// passwords.
type Secrets struct {
	// values are longest first, so that a secret that holds another is
	// replaced whole.
	values []string
}

// NewSecrets is the set of values (empty ones and those shorter than
// minSecret left out).
func NewSecrets(values ...string) *Secrets {
	return (&Secrets{}).With(values...)
}

// With is the set with values added; s is not changed.
func (s *Secrets) With(values ...string) *Secrets {
	var all []string
	if s != nil {
		all = slices.Clone(s.values)
	}
	for _, v := range values {
		if len(v) >= minSecret && !slices.Contains(all, v) {
			all = append(all, v)
		}
	}
	slices.SortStableFunc(all, func(a, b string) int { return len(b) - len(a) })
	return &Secrets{values: all}
}

// Values are the secret values, longest first.
func (s *Secrets) Values() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.values)
}

// Len is the number of secret values.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	return len(s.values)
}

// Text is t with every secret value, key shape and URL password replaced
// by Redacted.
func (s *Secrets) Text(t string) string {
	if s == nil {
		return RedactShapes(t)
	}
	return RedactText(t, s.values)
}

// Argv is argv as bmx records it: the values of secret-named flags (see
// RedactArgv) and every secret value hidden.
func (s *Secrets) Argv(argv []string) []string {
	out := RedactArgv(argv)
	for i, a := range out {
		out[i] = s.Text(a)
	}
	return out
}

// Env is a KEY=value environment as bmx records it: the values of
// secret-named variables (see RedactEnv) and every secret value hidden.
func (s *Secrets) Env(env []string) []string {
	out := RedactEnv(env)
	for i, kv := range out {
		out[i] = s.Text(kv)
	}
	return out
}

// Vars are vars as run.json records them: a var whose name looks secret,
// whose value is key-shaped or holds a secret is Redacted whole, so that a
// resume, which takes the recorded vars back, asks for it again rather
// than take a mangled value.
func (s *Secrets) Vars(vars map[string]string) map[string]string {
	out := RedactVars(vars)
	for k, v := range out {
		if s.Text(v) != v {
			out[k] = Redacted
		}
	}
	return out
}

// Cell is cell as bmx records it: its ID and values already carry
// stand-ins for secret axis values; its arguments and environment lose
// secret values too (by flag or variable name, by key shape, and by value).
func (s *Secrets) Cell(cell Cell) Cell {
	out := cell
	if cell.Args != nil {
		out.Args = s.Argv(cell.Args)
	}
	if cell.Env != nil {
		out.Env = make(map[string]string, len(cell.Env))
		for k, v := range cell.Env {
			if SecretName(k) {
				v = Redacted
			}
			out.Env[k] = s.Text(v)
		}
	}
	return out
}

// Secrets is the set of secret values of a run of the config, with environ
// (bmx's own environment, KEY=value, which every server inherits): the
// values of vars whose names look secret or that are key-shaped; axis
// values passed as secrets (see Axis.Secret); the values of secret-named
// flags and environment variables in the server's command and env, axis
// values' and includes' args and env, placeholders filled in; the
// passwords of URLs in any of them; and the values of environ's
// secret-named variables (minEnvSecret bytes or more), which a server may
// print into its log.
func (c *Config) Secrets(environ []string) *Secrets {
	var vals []string
	for k, v := range c.Vars {
		if SecretName(k) || SecretShape(v) {
			vals = append(vals, v)
		}
		vals = append(vals, urlPasswords(v)...)
	}
	args := [][]string{c.Server.Command}
	envs := []map[string]string{c.Server.Env}
	for _, a := range c.Axes {
		for _, v := range a.Values {
			if a.Secret(v.Name) {
				vals = append(vals, v.Name)
			}
			vals = append(vals, urlPasswords(v.Name)...)
			args, envs = append(args, v.Args), append(envs, v.Env)
		}
	}
	for _, inc := range c.Include {
		args, envs = append(args, inc.Args), append(envs, inc.Env)
	}
	for _, list := range args {
		argv := c.Render(list, Runtime{})
		vals = append(vals, CommandSecrets(nil, argv)...)
		for _, a := range argv {
			vals = append(vals, urlPasswords(a)...)
		}
	}
	for _, env := range envs {
		for k, v := range env {
			v = c.fill(v, Runtime{})
			if SecretName(k) {
				vals = append(vals, v)
			}
			vals = append(vals, urlPasswords(v)...)
		}
	}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && SecretName(k) && len(v) >= minEnvSecret {
			vals = append(vals, v)
		}
	}
	return NewSecrets(vals...)
}

// minEnvSecret is the shortest value of bmx's environment taken for a
// secret: a short one (AUTH_MODE=none, USE_AUTH=true) is a setting, and
// replacing that word wherever it stands would mangle the record.
const minEnvSecret = 8

// RedactedSource is the config's text as a run keeps it: secret-looking
// assignments and flag values, key shapes, URL passwords and the config's
// secret values hidden.
func (c *Config) RedactedSource() string {
	return c.Secrets(nil).Text(RedactSource(c.Source))
}

// RedactAll is v with every secret of s cut out of each of its strings,
// however deep (struct fields, slices, map values, pointers): a result or
// a run record as bmx writes it. Only strings of type string are
// redacted: named string types are enumerations (a verdict, a kind), never
// a secret. v is not changed: what holds a redacted string is copied.
func RedactAll[T any](s *Secrets, v T) T {
	out, changed := redactValue(reflect.ValueOf(&v).Elem(), s.Text)
	if !changed {
		return v
	}
	return out.Interface().(T)
}

var stringType = reflect.TypeFor[string]()

// redactValue is v with f applied to its strings, and whether that
// changed any; v is copied where it changed, never written.
func redactValue(v reflect.Value, f func(string) string) (reflect.Value, bool) {
	switch v.Kind() {
	case reflect.String:
		if v.Type() != stringType {
			return v, false
		}
		if s := f(v.String()); s != v.String() {
			return reflect.ValueOf(s), true
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		e, changed := redactValue(v.Elem(), f)
		if !changed {
			return v, false
		}
		if v.Kind() == reflect.Interface {
			out := reflect.New(v.Type()).Elem()
			out.Set(e)
			return out, true
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(e)
		return p, true
	case reflect.Struct:
		return redactStruct(v, f)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() != reflect.Uint8 { // bytes are not text
			return redactElems(v, f)
		}
	case reflect.Map:
		return redactMap(v, f)
	}
	return v, false
}

// redactStruct is redactValue of a struct: its exported fields.
func redactStruct(v reflect.Value, f func(string) string) (reflect.Value, bool) {
	var out reflect.Value
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		fv, changed := redactValue(v.Field(i), f)
		if !changed {
			continue
		}
		if !out.IsValid() {
			out = reflect.New(v.Type()).Elem()
			out.Set(v)
		}
		out.Field(i).Set(fv)
	}
	return out, out.IsValid()
}

// redactElems is redactValue of a slice or an array.
func redactElems(v reflect.Value, f func(string) string) (reflect.Value, bool) {
	var out reflect.Value
	for i := range v.Len() {
		ev, changed := redactValue(v.Index(i), f)
		if !changed {
			continue
		}
		if !out.IsValid() {
			out = reflect.New(v.Type()).Elem()
			if v.Kind() == reflect.Slice {
				out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
			}
			reflect.Copy(out, v)
		}
		out.Index(i).Set(ev)
	}
	return out, out.IsValid()
}

// redactMap is redactValue of a map: its values (keys are names, not
// secrets).
func redactMap(v reflect.Value, f func(string) string) (reflect.Value, bool) {
	var out reflect.Value
	for it := v.MapRange(); it.Next(); {
		ev, changed := redactValue(it.Value(), f)
		if !changed {
			continue
		}
		if !out.IsValid() {
			out = reflect.MakeMapWithSize(v.Type(), v.Len())
			for all := v.MapRange(); all.Next(); {
				out.SetMapIndex(all.Key(), all.Value())
			}
		}
		out.SetMapIndex(it.Key(), ev)
	}
	return out, out.IsValid()
}
