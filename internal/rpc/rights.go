package rpc

import (
	"fmt"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/proxy"
)

// permissionDenied is the error of a request for a method that needs
// rights its connection's credential lacks: it names what is missing.
func permissionDenied(need, have actor.Rights) error {
	return fmt.Errorf("%w: the method requires the %v right, which the caller's credential does not grant (it grants %v)",
		proxy.ErrPermissionDenied, need&^have, have)
}
