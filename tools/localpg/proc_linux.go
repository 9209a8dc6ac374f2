package localpg

import "syscall"

// sysProcAttr runs initdb and postgres as cred (nil: as ourselves), in
// their own process group (the terminal's Ctrl-C goes to the parent, which
// calls Stop), and has the kernel kill them when the parent dies: pg_ctl
// would daemonize the server and orphan it when a test binary crashes.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
