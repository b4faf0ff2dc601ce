//go:build !linux

package redistest

import "syscall"

// sysProcAttr has nothing to add where the parent-death signal does not
// exist.
func sysProcAttr() *syscall.SysProcAttr { return nil }
