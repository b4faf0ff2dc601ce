package redistest

import "syscall"

// sysProcAttr makes the kernel kill the server if the test process dies
// without running its cleanups (a timeout panic, a kill), so that no
// redis-server outlives the test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
