package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/granary-go/granary/actor"
)

// Sentinel errors of grain calls. Errors that crossed the wire arrive as
// *RemoteError, which matches these with errors.Is.
var (
	ErrUnknownGrainType  = actor.ErrUnknownGrainType
	ErrUnknownMethod     = actor.ErrUnknownMethod
	ErrBadRequest        = errors.New("proxy: bad request")
	ErrPanic             = actor.ErrPanic
	ErrUnavailable       = actor.ErrUnavailable
	ErrOverloaded        = errors.New("proxy: silo overloaded")
	ErrTimeout           = errors.New("proxy: response timeout")
	ErrBudgetExpired     = errors.New("proxy: call budget expired")
	ErrInvalidDescriptor = errors.New("proxy: invalid service descriptor")
	ErrDuplicateCall     = errors.New("proxy: call id already active")
	ErrApplication       = errors.New("proxy: grain returned an error")
)

// Code classifies the outcome of a call on the wire.
type Code uint8

// Codes, numbered as the wire's reply status.
const (
	CodeOK Code = iota
	CodeApplication
	CodeUnknownGrainType
	CodeUnknownMethod
	CodeBadRequest
	CodePanic
	CodeCancelled
	CodeTimeout
	CodeUnavailable
	CodeOverloaded
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
}

// RemoteError is an error reported by the silo that ran (or refused) the
// call. errors.Is matches it against the sentinel of its code.
type RemoteError struct {
	Code    Code
	Message string
}

func (e *RemoteError) Error() string {
	if e.Message == "" {
		return e.Unwrap().Error()
	}
	return e.Unwrap().Error() + ": " + e.Message
}

// Unwrap returns the sentinel error of the code.
func (e *RemoteError) Unwrap() error {
	if int(e.Code) < len(codeErrors) && codeErrors[e.Code] != nil {
		return codeErrors[e.Code]
	}
	return ErrApplication
}

// CodeOf classifies err for the wire: the code of a *RemoteError or of a
// known sentinel, CodeCancelled for context.Canceled, else CodeApplication.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	for c, sentinel := range codeErrors {
		if sentinel != nil && errors.Is(err, sentinel) {
			return Code(c)
		}
	}
	return CodeApplication
}

// ErrorOf turns a wire code and message back into an error: nil for
// CodeOK, else a *RemoteError.
func ErrorOf(code Code, message string) error {
	if code == CodeOK {
		return nil
	}
	return &RemoteError{Code: code, Message: message}
}

// TimeoutError reports that no reply arrived within the response timeout.
// It matches ErrTimeout with errors.Is.
type TimeoutError struct {
	Target  actor.GrainID
	Method  string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("proxy: %s.%s: no response within %v", e.Target, e.Method, e.Timeout)
}

// Unwrap returns ErrTimeout.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }
