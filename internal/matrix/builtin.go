package matrix

import _ "embed"

//go:embed builtin/sim-sm120.toml
var builtinSim []byte

// BuiltinName is what the built-in config is called in messages and run.json.
const BuiltinName = "builtin:sim-sm120"

// Load reads the matrix file at path, or the built-in simulated host when
// path is "", with vars set.
func Load(path string, vars map[string]string) (*Config, error) {
	if path == "" {
		return Builtin(vars)
	}
	return LoadFile(path, vars)
}

// Builtin returns the built-in sweep of the simulated SM120 host.
func Builtin(vars map[string]string) (*Config, error) {
	return Parse(BuiltinName, builtinSim, vars)
}
