package matrix

import (
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PathVars are the vars that name what a server loads: their values are
// checked to exist when they look like local paths (see LooksLocal).
// server.paths names more, checked whatever they look like.
var PathVars = []string{"model", "model_path", "tokenizer", "tokenizer_path"}

// modelFlags are server flags whose value is a model or tokenizer to load
// (SGLang's, vLLM's, llama.cpp's long forms).
var modelFlags = []string{"--model", "--model-path", "--model-dir", "--tokenizer", "--tokenizer-path", "--tokenizer-dir"}

// modelExts end the names of files a server loads.
var modelExts = []string{".gguf", ".safetensors", ".bin", ".pt", ".pth", ".onnx", ".json", ".jinja", ".model", ".tiktoken"}

// LooksLocal reports whether v names a local file or directory rather than a
// Hugging Face model id ("Qwen/Qwen3-30B", one slash) or a URL: it starts
// with /, ./, ../ or ~, has two slashes or more, ends in a model file's
// extension, or its first element is a directory that exists (Hugging Face
// itself reads such a value as a local path).
func LooksLocal(v string) bool {
	switch {
	case v == "" || strings.Contains(v, "://") || strings.ContainsAny(v, "{}"):
		return false
	case v == "." || v == ".." || v == "~" || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "../") || strings.HasPrefix(v, "~/"):
		return true
	case strings.Count(v, "/") >= 2:
		return true
	case slices.Contains(modelExts, strings.ToLower(filepath.Ext(v))):
		return true
	}
	first, _, found := strings.Cut(v, "/")
	if !found {
		return false
	}
	info, err := os.Stat(first)
	return err == nil && info.IsDir()
}

// expandHome replaces a leading ~ with the home directory.
func expandHome(v string) string {
	if v != "~" && !strings.HasPrefix(v, "~/") {
		return v
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return v
	}
	return filepath.Join(home, strings.TrimPrefix(v, "~"))
}

// missing reports whether path does not exist (a path that cannot be
// examined for another reason, such as permissions, is the server's to
// report).
func missing(path string) bool {
	_, err := os.Stat(expandHome(path))
	return errors.Is(err, fs.ErrNotExist)
}

// MissingPaths finds, before any server starts, the files and directories the
// config tells the server to load that do not exist, one *ConfigError each
// (naming the file, the line, the key and the value):
//   - the vars of PathVars whose values look local (LooksLocal), and every
//     var server.paths names, whatever its value looks like;
//   - the arguments built on {dir} (a script or a file beside the config),
//     in the command, the environment, axis values and includes;
//   - the local-looking values of --model, --model-path, --tokenizer and
//     their kin in the cells' command lines.
//
// Relative paths are checked against the working directory, which the
// server inherits. Only vars some placeholder uses are checked.
func (c *Config) MissingPaths(cells []Cell) []error {
	return c.MissingPathsIn(slices.Values(cells))
}

// MissingPathsIn is MissingPaths of cells built one at a time (a Stream's).
func (c *Config) MissingPathsIn(cells iter.Seq[Cell]) []error {
	loc := newLocator(c.Source)
	var errs []error
	seen := map[string]bool{} // values already checked
	used := c.usedPlaceholders()
	names := slices.Clone(PathVars)
	for _, k := range c.Server.Paths {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	for _, k := range names {
		v, ok := c.Vars[k]
		if !ok || v == "" || !used[k] {
			continue
		}
		explicit := slices.Contains(c.Server.Paths, k)
		if !explicit && !LooksLocal(v) {
			continue
		}
		seen[v] = true
		switch {
		case !missing(v):
		case c.VarFlags[k]:
			errs = append(errs, &ConfigError{File: c.Path, Key: "--var " + k,
				Msg: fmt.Sprintf("%q does not exist (the server is told to load it): fix the path given to --var %s", v, k)})
		default:
			errs = append(errs, &ConfigError{File: c.Path, Line: loc.line("vars", k), Key: "vars." + k,
				Msg: fmt.Sprintf("%q does not exist (the server is told to load it): fix the path or pass --var %s=PATH", v, k)})
		}
	}
	if c.Dir != "" {
		check := func(line int, key, s string) {
			if !strings.Contains(s, "{"+PlaceholderDir+"}") {
				return
			}
			p := c.fill(s, Runtime{})
			if i := strings.IndexByte(p, '='); i > 0 && strings.HasPrefix(p, "-") {
				p = p[i+1:] // --config={dir}/x.yaml
			}
			if strings.ContainsAny(p, "{}") || seen[p] {
				return
			}
			seen[p] = true
			if missing(p) {
				errs = append(errs, &ConfigError{File: c.Path, Line: line, Key: key,
					Msg: fmt.Sprintf("%q is %s, which does not exist ({dir} is the config's directory)", s, p)})
			}
		}
		c.eachTemplate(loc, check)
	}
	if !c.mayNameModel() {
		return errs
	}
	for cell := range cells {
		argv, _ := c.Command(cell, Runtime{})
		for i, a := range argv {
			flag, v := a, ""
			if f, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
				flag, v = f, val
			} else if i+1 < len(argv) {
				v = argv[i+1]
			}
			if !slices.Contains(modelFlags, flag) || seen[v] || !LooksLocal(v) {
				continue
			}
			seen[v] = true
			if missing(v) {
				errs = append(errs, &ConfigError{File: c.Path, Key: "cell " + cell.ID,
					Msg: fmt.Sprintf("%s %q does not exist (the server is told to load it)", flag, v)})
			}
		}
	}
	return errs
}

// mayNameModel reports whether a cell's argv can hold a model flag: whether
// one is in any string its argv is made of (a value filled in included).
// Where none is, MissingPathsIn need not render each cell, which for a
// plan of a million cells is most of its time.
func (c *Config) mayNameModel() bool {
	has := func(s string) bool {
		return strings.Contains(s, "--model") || strings.Contains(s, "--tokenizer")
	}
	if slices.ContainsFunc(c.Server.Command, has) || has(c.Server.Host) || has(c.Dir) {
		return true
	}
	for _, v := range c.Vars {
		if has(v) {
			return true
		}
	}
	for _, a := range c.Axes {
		if has(a.Flag) {
			return true
		}
		for _, v := range a.Values {
			if has(v.Name) || slices.ContainsFunc(v.Args, has) {
				return true
			}
		}
	}
	for _, inc := range c.Include {
		if slices.ContainsFunc(inc.Args, has) || slices.ContainsFunc(slices.Collect(maps.Values(inc.Values)), has) {
			return true
		}
	}
	return false
}

// eachTemplate calls f with every string of the config a placeholder may be
// in: the command, the environment, axis values' args and env, includes'.
func (c *Config) eachTemplate(loc *locator, f func(line int, key, s string)) {
	for _, s := range c.Server.Command {
		f(loc.line("server", "command"), "server.command", s)
	}
	for _, k := range sortedKeys(c.Server.Env) {
		f(loc.line("server", "env", k), "server.env."+k, c.Server.Env[k])
	}
	for i, a := range c.Axes {
		for j, v := range a.Values {
			line := loc.line("axis", fmt.Sprintf("[%d]", i), "values", fmt.Sprintf("[%d]", j))
			for _, s := range v.Args {
				f(line, "axis.values.args", s)
			}
			for _, k := range sortedKeys(v.Env) {
				f(line, "axis.values.env", v.Env[k])
			}
		}
	}
	for i, inc := range c.Include {
		line := loc.line("include", fmt.Sprintf("[%d]", i))
		for _, s := range inc.Args {
			f(line, "include.args", s)
		}
		for _, k := range sortedKeys(inc.Env) {
			f(line, "include.env", inc.Env[k])
		}
	}
}

// usedPlaceholders are the names of the placeholders the config's templates
// use.
func (c *Config) usedPlaceholders() map[string]bool {
	used := map[string]bool{}
	c.eachTemplate(newLocator(""), func(_ int, _, s string) {
		for _, m := range placeholderRe.FindAllStringSubmatch(s, -1) {
			used[m[1]] = true
		}
	})
	return used
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
