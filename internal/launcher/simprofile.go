package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/launcher/sim"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// SimProfileErrors checks the behaviour profile that server.command gives
// bmx's own simulated server (sim-server --sim-profile FILE) as the server
// will read it (sim.ParseProfile): a profile that does not decode makes
// every cell's server refuse to start the same way, so it is one error of
// the setup, found before any server starts. One error per problem, each
// naming the config, the file and the rule. A profile that is not there is
// left to the server (and plan --check's help check), which say so.
func SimProfileErrors(cfg *matrix.Config, self string) []error {
	argv := cfg.Render(cfg.Server.Command, matrix.Runtime{Self: self})
	at := slices.Index(argv, "sim-server")
	if at < 0 {
		return nil
	}
	var errs []error
	args := argv[at+1:]
	for i, a := range args {
		file, ok := strings.CutPrefix(a, "--sim-profile=")
		if !ok {
			if a != "--sim-profile" || i+1 >= len(args) {
				continue
			}
			file = args[i+1]
		}
		if file == "" || strings.ContainsAny(file, "{}") {
			continue
		}
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			_, err = sim.ParseProfile(file, data)
		}
		if err == nil {
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			errs = append(errs, fmt.Errorf("%s: server.command: --sim-profile %s", cfg.Path, line))
		}
	}
	return errs
}
