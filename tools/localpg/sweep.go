package localpg

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// dirPattern names data directories (os.MkdirTemp pattern).
	dirPattern = "pgtools-pg-*"
	// staleAge protects directories another process is still setting up
	// (initdb takes about a second).
	staleAge = time.Minute
)

// sweepStale removes data directories in parent left by runs that died without Stop:
// the kernel killed their postgres (Pdeathsig) but nobody removed the
// directory. A directory is stale when it is older than staleAge and no
// live process holds its postmaster.pid. Errors are ignored: this is
// housekeeping, and another user's directories are not ours to remove.
func sweepStale(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPattern))
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < staleAge || serverAlive(dir) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// serverAlive reports whether the postmaster recorded in dir may still be
// running. Anything unclear counts as alive, so a directory is only
// removed when it certainly belongs to nobody.
func serverAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return false // initdb finished long ago and no server ever started, or it was killed before writing the file
	}
	if err != nil {
		return true
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return true
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
