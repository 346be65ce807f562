package main

import "fmt"

// minAddressSpace is the least virtual memory (ulimit -v) bmx runs in. Under
// a limit the Go runtime reserves about 620 MB of address space as it
// starts, before bmx has used any memory (arenas_cgo_linux.go); a plan of 2
// cells then fits in 800 MB and a sweep of the simulated host, with its
// servers' supervisors, in 950 MB (Linux amd64, 2 CPUs). Below this bmx says
// so in one line instead of dying later in a runtime crash dump; below about
// 750 MB the Go runtime dies before bmx runs.
const minAddressSpace = 1 << 30

// checkAddressSpace returns an error, one line that names the limit, when
// the process's address space is limited below minAddressSpace.
func checkAddressSpace() error {
	limit, ok := addressSpaceLimit()
	if !ok || limit >= minAddressSpace {
		return nil
	}
	return fmt.Errorf("the virtual-memory limit (ulimit -v %d, %d MiB) is below the %d MiB bmx needs, most of it address space the Go runtime reserves as it starts: raise it to at least ulimit -v %d",
		limit>>10, limit>>20, minAddressSpace>>20, minAddressSpace>>10)
}
