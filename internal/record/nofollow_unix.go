//go:build unix

package record

import "golang.org/x/sys/unix"

// noFollow makes an open fail on a symbolic link instead of following it.
const noFollow = unix.O_NOFOLLOW
