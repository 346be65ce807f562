package sim

import (
	"fmt"
	"strconv"
)

// versionKey carries the simulated version in Resolved, where rules read
// it; it is never a server arg (/get_server_info does not list it).
const versionKey = "sim_version"

// version is the simulated version the options ask for: 1 unless set.
func (o Options) version() int {
	if o.Version < 1 {
		return 1
	}
	return o.Version
}

// version is the simulated version of resolved args (1 when unset).
func (r Resolved) version() int {
	v, err := strconv.Atoi(r[versionKey])
	if err != nil || v < 1 {
		return 1
	}
	return v
}

// holdsAt reports whether the rule holds for a simulated version: Since <=
// version < Before, an unset bound (0) being no bound.
func (r Rule) holdsAt(version int) bool {
	return (r.Since == 0 || version >= r.Since) && (r.Before == 0 || version < r.Before)
}

// Versions are the package versions of a simulated version, as
// name=version lines (a versions_command's output): the engine's version
// moves with it, so a run's fingerprint says which version it ran.
func Versions(version int) string {
	return fmt.Sprintf("sglang=0.5.%d.dev0+sim\nflashinfer=0.6.5+sim\ntorch=2.12.0.dev+sim\nsim=%d\n", version, version)
}
