//go:build unix && !linux

package localpg

import "syscall"

// sysProcAttr runs initdb and postgres as cred (nil: as ourselves) in their
// own process group. Outside Linux there is no parent-death signal: if the
// parent dies without Stop, the server keeps running until it is killed.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
