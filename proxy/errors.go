package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/granary-go/granary/actor"
)

// Sentinel errors of grain calls. A call that fails in the runtime returns
// a *CallError (or a *TimeoutError), which matches these with errors.Is,
// whether the grain is in the caller's process or on another silo.
var (
	ErrUnknownGrainType = actor.ErrUnknownGrainType
	ErrUnknownMethod    = actor.ErrUnknownMethod
	ErrBadRequest       = errors.New("proxy: bad request")
	ErrPanic            = actor.ErrPanic
	ErrActivation       = actor.ErrActivation
	ErrUnavailable      = actor.ErrUnavailable
	ErrOverloaded       = errors.New("proxy: silo overloaded")
	ErrTimeout          = errors.New("proxy: response timeout")
	ErrBudgetExpired    = errors.New("proxy: call budget expired")
	ErrForwardLimit     = errors.New("proxy: forwarding limit reached")
	// ErrPermissionDenied: the caller's credential lacks a right the method
	// requires; the message names the right. The call changed nothing.
	ErrPermissionDenied  = errors.New("proxy: permission denied")
	ErrInvalidDescriptor = errors.New("proxy: invalid service descriptor")
	// ErrApplication matches every *Error: the grain itself returned an
	// error, as opposed to the runtime failing the call.
	ErrApplication = errors.New("proxy: grain returned an error")
)

// Code classifies the outcome of a call, as the wire's reply status does.
type Code uint8

// Codes, numbered as the wire's reply status. They never change.
const (
	CodeOK               Code = 0
	CodeApplication      Code = 1 // the grain returned an error: see *Error
	CodeUnknownGrainType Code = 2
	CodeUnknownMethod    Code = 3
	CodeBadRequest       Code = 4
	CodePanic            Code = 5
	CodeCancelled        Code = 6
	CodeTimeout          Code = 7
	CodeUnavailable      Code = 8
	CodeOverloaded       Code = 9
	CodeForwardLimit     Code = 10
	CodeActivation       Code = 11
	CodePermissionDenied Code = 12
)

var codeErrors = [...]error{
	CodeApplication:      ErrApplication,
	CodeUnknownGrainType: ErrUnknownGrainType,
	CodeUnknownMethod:    ErrUnknownMethod,
	CodeBadRequest:       ErrBadRequest,
	CodePanic:            ErrPanic,
	CodeCancelled:        context.Canceled,
	CodeTimeout:          ErrTimeout,
	CodeUnavailable:      ErrUnavailable,
	CodeOverloaded:       ErrOverloaded,
	CodeForwardLimit:     ErrForwardLimit,
	CodeActivation:       ErrActivation,
	CodePermissionDenied: ErrPermissionDenied,
}

// String returns the code's name.
func (c Code) String() string {
	if int(c) < len(codeErrors) && codeErrors[c] != nil {
		return codeErrors[c].Error()
	}
	if c == CodeOK {
		return "ok"
	}
	return "code " + strconv.Itoa(int(c))
}

// Error is an error a grain returns on purpose, with a code and message
// of its own and optional details, in the spirit of a gRPC status. The
// caller receives an *Error with the same code, message and details
// whether the grain ran in its process or on another silo. A grain that
// returns any other error value is seen by its caller as an *Error with
// code 0 and the error's text: error values themselves never cross from
// grain to caller, on any path.
//
// errors.Is matches two *Error values by code alone, so a package can
// declare sentinels (var ErrNotFound = proxy.NewError(404, "not found"))
// and callers can test for them; every *Error also matches ErrApplication.
type Error struct {
	// Code is the grain's own classification; its meaning is the
	// contract's business. 0 means unclassified.
	Code uint32
	// Message describes the failure to a human.
	Message string
	// Details carries structured information, as google.protobuf.Any
	// values; decode one with its UnmarshalTo.
	Details []*anypb.Any
}

// NewError returns an *Error with the given code and message.
func NewError(code uint32, message string) *Error { return &Error{Code: code, Message: message} }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code uint32, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns a copy of e that carries msgs as further details.
func (e *Error) WithDetails(msgs ...proto.Message) (*Error, error) {
	out := &Error{Code: e.Code, Message: e.Message, Details: append([]*anypb.Any(nil), e.Details...)}
	for _, m := range msgs {
		a, err := anypb.New(m)
		if err != nil {
			return nil, fmt.Errorf("proxy: error detail: %w", err)
		}
		out.Details = append(out.Details, a)
	}
	return out, nil
}

// Error returns the message, followed by the code when it is not 0.
func (e *Error) Error() string {
	if e.Code == 0 {
		return e.Message
	}
	return e.Message + " (code " + strconv.FormatUint(uint64(e.Code), 10) + ")"
}

// ErrorCode returns e.Code. An error of another package with the same
// method is, to errors.Is, the same error as an *Error of its code (see
// Is): a library's sentinel that its grain sends as an *Error is matched
// by callers on either side of a connection.
func (e *Error) ErrorCode() uint32 { return e.Code }

// Is reports whether target is ErrApplication or an error with the same
// code: an *Error, or an error of another package that reports its code
// through an ErrorCode method.
func (e *Error) Is(target error) bool {
	if target == ErrApplication {
		return true
	}
	t, ok := target.(interface{ ErrorCode() uint32 })
	return ok && t.ErrorCode() == e.Code
}

// CallError reports that the runtime failed a call (the grain type is
// unknown, the silo is unavailable, the method panicked, ...), as opposed
// to the grain returning an error of its own. errors.Is matches it
// against the sentinel of its code.
type CallError struct {
	// Code says how the call failed.
	Code Code
	// Message says more, for a human.
	Message string
}

// Error returns the sentinel's text and the message, without repeating
// the sentinel when the message already says it.
func (e *CallError) Error() string {
	sentinel := e.Unwrap().Error()
	switch {
	case e.Message == "":
		return sentinel
	case strings.Contains(e.Message, sentinel):
		return e.Message
	}
	return sentinel + ": " + e.Message
}

// Unwrap returns the sentinel error of the code.
func (e *CallError) Unwrap() error {
	if int(e.Code) < len(codeErrors) && codeErrors[e.Code] != nil {
		return codeErrors[e.Code]
	}
	return ErrUnavailable
}

// TimeoutError reports that no reply arrived within the response timeout.
// It matches ErrTimeout with errors.Is.
type TimeoutError struct {
	// Target is the grain that was called.
	Target actor.GrainID
	// Method is the method's full name, "service/method".
	Method string
	// Timeout is the response timeout that passed.
	Timeout time.Duration
}

// Error says which call got no response in how long.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("proxy: %s.%s: no response within %v", e.Target, e.Method, e.Timeout)
}

// Unwrap returns ErrTimeout.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }
