//go:build !linux

package pgtest

// fastParentDir returns "" (os.TempDir) outside Linux.
func fastParentDir() string { return "" }
