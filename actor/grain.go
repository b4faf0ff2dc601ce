package actor

import "context"

// Activator is implemented by grains that run code when they activate. It
// runs in the activation's first turn, after stored state was loaded and
// before any request.
type Activator interface {
	// OnActivate prepares the grain; an error fails the activation and the
	// requests waiting for it.
	OnActivate(ctx context.Context, gc *Context) error
}

// Deactivator is implemented by grains that run code when they deactivate.
// It runs in the activation's last turn, before the final state flush. Like
// Orleans, it is best effort: it does not run when a process crashes.
type Deactivator interface {
	// OnDeactivate runs before the final flush; an error is logged.
	OnDeactivate(ctx context.Context, gc *Context) error
}

// Stateful is implemented by grains with persistent state. LoadState runs
// before OnActivate when stored state exists; SaveState runs inside a turn
// whenever the runtime flushes dirty state (periodically, on demand and on
// deactivation). Mark state dirty with Context.MarkDirty.
type Stateful interface {
	// LoadState restores the state SaveState encoded.
	LoadState(data []byte) error
	// SaveState encodes the grain's state.
	SaveState() ([]byte, error)
}
