//go:build cgo

package main

// Under a virtual-memory limit (ulimit -v) two things outside Go's heap
// decide whether bmx starts at all, and both happen before the Go runtime
// runs a line of bmx; so a C constructor, which the C runtime calls before
// Go's, sets them up.
//
// glibc's malloc reserves 64 MB of address space (128 MB while it aligns
// it) for each thread that allocates, up to 8 a CPU, and each thread the Go
// runtime starts does (pthread_getattr_np): on 2 CPUs a plan of 2 cells
// reached 1.58 GB and a sweep 1.77 GB of address space with 30 MB resident,
// and under `ulimit -v 1500000` both died in a runtime crash dump
// ("pthread_create failed"), often before main. The constructor holds
// malloc to two arenas, as MALLOC_ARENA_MAX=2 does (glibc reads the variable
// only as a process starts); a MALLOC_ARENA_MAX or glibc.malloc.arena_max
// the user set wins, and the servers bmx starts get the environment as it
// was.
//
// The Go runtime (1.2x, amd64) reserves 585 MB for its page summaries as it
// starts, then 512 MB for the scavenger's index if the limit leaves room, or
// grows a small one as it goes if not; with the larger one a limit between
// about 1.2 and 1.35 GB left too little for anything else, and bmx died in
// its first allocation. The constructor holds all but 1000 MB of a limit in
// a reservation of its own (ballast), so the runtime always takes the small
// index, and releaseBallast gives it back before main.

/*
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static void *bmx_ballast;
static size_t bmx_ballast_size;

static void bmx_hold_ballast(void) {
	struct rlimit lim;
	if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) {
		return;
	}
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL) {
		return;
	}
	int n = fscanf(f, "%lu", &pages);
	fclose(f);
	if (n != 1) {
		return;
	}
	const uint64_t keep = 1000ull << 20;
	uint64_t used = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
	if (lim.rlim_cur <= used + keep + (64ull << 20)) {
		return;
	}
	size_t size = (size_t)(lim.rlim_cur - used - keep);
	void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED) {
		bmx_ballast = p;
		bmx_ballast_size = size;
	}
}

__attribute__((constructor)) static void bmx_address_space(void) {
#ifdef M_ARENA_MAX
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") == NULL && (tunables == NULL || strstr(tunables, "arena_max") == NULL)) {
		mallopt(M_ARENA_MAX, 2);
	}
#endif
	bmx_hold_ballast();
}

static void bmx_release_ballast(void) {
	if (bmx_ballast != NULL) {
		munmap(bmx_ballast, bmx_ballast_size);
		bmx_ballast = NULL;
	}
}
*/
import "C"

// init gives back the constructor's ballast: the runtime has made its
// reservations by the time package main is initialised.
func init() { C.bmx_release_ballast() }
