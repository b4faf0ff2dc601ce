// Package proxy is the runtime behind generated grain references and
// dispatchers.
//
// The generator (proxy/cmd/granarygen, run by go generate) writes, for each
// protobuf service, a typed reference (NewXRef), a server interface
// (XGrain), a ServiceDesc with stable method ids (MethodID), and a
// RegisterXGrain function. References are built on a Caller: a silo.Client
// or a silo's own caller.
//
// # Timeouts and budgets
//
// A call's response timeout is the per-call WithTimeout option, else the
// caller's ResponseTimeout. Methods marked with the option
// (granary.bounded) = true also carry a budget: 80% of the response
// timeout, or the time left before the caller's deadline when that is
// shorter. The budget is a number on the request (Call.Budget); the
// server starts counting it when the method begins, and the method reads
// it with actor.Budget, so activation and routing
// time count only against the response timeout. It is not a globally
// synchronised deadline. Nothing about it arms a timer unless the grain
// has to wait.
//
// # Filters
//
// OutgoingFilter and IncomingFilter intercept calls. With none registered
// a call takes a direct path with no chain and no extra allocation.
//
// # Cancellation
//
// Cancelling the context of a call the caller marked cancellable sends a
// cancel to the server, which cancels the method's context (push
// cancellation); a cancel that overtakes its request is remembered for a
// bounded time, one after the call finished is a no-op.
//
// # Errors
//
// A call the runtime failed returns a *CallError, which matches the
// package's sentinels with errors.Is by its Code, on whichever side of a
// connection it arose; an error a grain returned on purpose is an *Error
// with the grain's code, matched by that code (and ErrApplication); a
// response timeout is a *TimeoutError matching ErrTimeout; a caller's
// cancellation is context.Canceled.
package proxy
