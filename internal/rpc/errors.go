package rpc

import (
	"context"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// wireError is a call's failure as a reply carries it.
type wireError struct {
	status  wire.Status
	message string
	code    uint32   // the grain's code, with StatusAppError
	details [][]byte // encoded google.protobuf.Any values, with StatusAppError
}

// runtimeErrors maps the runtime's sentinels to their codes, the outermost
// meaning first: a failed activation may wrap the panic that failed it.
var runtimeErrors = []struct {
	err  error
	code proxy.Code
}{
	{proxy.ErrActivation, proxy.CodeActivation},
	{proxy.ErrUnknownGrainType, proxy.CodeUnknownGrainType},
	{proxy.ErrUnknownMethod, proxy.CodeUnknownMethod},
	{proxy.ErrBadRequest, proxy.CodeBadRequest},
	{proxy.ErrPanic, proxy.CodePanic},
	{proxy.ErrForwardLimit, proxy.CodeForwardLimit},
	{proxy.ErrPermissionDenied, proxy.CodePermissionDenied},
	{proxy.ErrOverloaded, proxy.CodeOverloaded},
	{proxy.ErrUnavailable, proxy.CodeUnavailable},
	{proxy.ErrTimeout, proxy.CodeTimeout},
	{context.DeadlineExceeded, proxy.CodeTimeout},
	{context.Canceled, proxy.CodeCancelled},
}

// encodeError turns the outcome of a call into what a reply carries: the
// code of a *proxy.CallError or of a runtime sentinel, else an
// application error (a *proxy.Error keeps its code and details; any other
// error becomes code 0 with its text).
func encodeError(err error) wireError {
	var ce *proxy.CallError
	if errors.As(err, &ce) {
		return wireError{status: wire.Status(ce.Code), message: ce.Message}
	}
	var ge *proxy.Error
	if errors.As(err, &ge) {
		w := wireError{status: wire.StatusAppError, message: ge.Message, code: ge.Code}
		for _, d := range ge.Details {
			if b, merr := proto.Marshal(d); merr == nil {
				w.details = append(w.details, b)
			}
		}
		return w
	}
	for _, r := range runtimeErrors {
		if errors.Is(err, r.err) {
			return wireError{status: wire.Status(r.code), message: err.Error()}
		}
	}
	return wireError{status: wire.StatusAppError, message: err.Error()}
}

// decodeError turns a reply's failure back into the caller's error. A
// status is an int32 on the wire while a proxy.Code is a byte: one outside
// the byte's range must not truncate into CodeOK (256) or a known code.
func decodeError(w wireError) error {
	switch {
	case w.status == wire.StatusOK:
		return nil
	case w.status == wire.StatusAppError:
		ge := &proxy.Error{Code: w.code, Message: w.message}
		for _, b := range w.details {
			a := new(anypb.Any)
			if proto.Unmarshal(b, a) == nil {
				ge.Details = append(ge.Details, a)
			}
		}
		return ge
	case w.status < 0 || w.status > math.MaxUint8:
		return &proxy.CallError{Code: proxy.CodeUnavailable, Message: fmt.Sprintf("unknown reply status %d: %s", w.status, w.message)}
	}
	return &proxy.CallError{Code: proxy.Code(w.status), Message: w.message}
}

// setError fills a reply envelope's failure fields.
func (w wireError) setOn(env *wire.Envelope) {
	env.Status, env.Error, env.ErrorCode, env.ErrorDetails = w.status, w.message, w.code, w.details
}

// errorOf reads a reply envelope's failure.
func errorOf(env *wire.Envelope) error {
	if env.Status == wire.StatusOK {
		return nil
	}
	return decodeError(wireError{status: env.Status, message: env.Error, code: env.ErrorCode, details: env.ErrorDetails})
}

// sameAsRemote gives a local caller the error a remote one would get.
func sameAsRemote(err error) error {
	if err == nil {
		return nil
	}
	return decodeError(encodeError(err))
}
