package actor

import (
	"errors"
	"fmt"
)

// Errors of the activation runtime.
var (
	// ErrUnknownGrainType: no grain type of that name is registered.
	ErrUnknownGrainType = errors.New("actor: unknown grain type")
	// ErrUnknownMethod: the grain type has no method with that id.
	ErrUnknownMethod = errors.New("actor: unknown method")
	// ErrUnavailable is wrapped by the errors that mean the grain could not
	// be reached here and now (ErrStopping, ErrDeactivated): a caller may
	// try again later. proxy.ErrUnavailable is the same error.
	ErrUnavailable = errors.New("actor: grain unavailable")
	// ErrStopping: the silo is stopping and takes no new work.
	ErrStopping = fmt.Errorf("%w: actor: host is stopping", ErrUnavailable)
	// ErrDeactivated: the activation deactivated before it answered.
	ErrDeactivated = fmt.Errorf("%w: actor: activation deactivated before replying", ErrUnavailable)
	// ErrActivation: loading the grain's state or OnActivate failed.
	ErrActivation = errors.New("actor: activation failed")
	// ErrPanic: the grain's code panicked.
	ErrPanic = errors.New("actor: grain method panicked")
	// ErrNotInTurn: Context.Defer was called outside a request's turn.
	ErrNotInTurn = errors.New("actor: not inside a request turn")
)
