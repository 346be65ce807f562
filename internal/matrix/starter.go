package matrix

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed starters/*.tmpl
var starterFS embed.FS

// StarterOptions fill a starter config.
type StarterOptions struct {
	Engine string
	Model  string
	TP     int
	// File is the name the config will be saved as, for its comments.
	File string
}

// Starter returns a commented matrix.toml for an SM120 NVFP4 MoE sweep on
// the engine. It parses as a valid config.
func Starter(o StarterOptions) (string, error) {
	if o.TP < 1 {
		return "", fmt.Errorf("--tp %d: want at least 1", o.TP)
	}
	data, err := starterFS.ReadFile("starters/" + o.Engine + ".toml.tmpl")
	if err != nil {
		return "", fmt.Errorf("unknown engine %q (one of %s)", o.Engine, strings.Join(Engines, ", "))
	}
	if o.Model == "" {
		o.Model = map[string]string{"sim": "simulated/Qwen3.5-397B-A17B-NVFP4"}[o.Engine]
		if o.Model == "" {
			o.Model = "/models/Qwen3.5-397B-A17B-NVFP4"
		}
	}
	if strings.ContainsAny(o.Model, "\"\\\n") {
		return "", fmt.Errorf("--model %q: quotes, backslashes and newlines are not supported", o.Model)
	}
	if o.File == "" {
		o.File = "matrix.toml"
	}
	t, err := template.New(o.Engine).Parse(string(data))
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, o); err != nil {
		return "", err
	}
	return b.String(), nil
}
