//go:build unix

package occupant

import (
	"os"
	"syscall"
)

// inode is the file's inode number, as /proc/locks names it.
func inode(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Ino), true
}
