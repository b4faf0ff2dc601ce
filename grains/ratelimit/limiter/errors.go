package limiter

import (
	"errors"
	"strings"
)

// Sentinel errors. A rejected acquisition is not an error: it is a [Lease]
// whose Acquired method reports false.
var (
	// ErrNegativeCount is returned when a permit count is below zero. It is
	// checked before anything else.
	ErrNegativeCount error = &argumentError{"limiter: permit count is negative", 4001}
	// ErrCountExceedsLimit is returned when a permit count is above the
	// limiter's permit (or token) limit, so it could never be satisfied. It
	// is checked before ErrClosed.
	ErrCountExceedsLimit error = &argumentError{"limiter: permit count exceeds the limit", 4002}
	// ErrClosed is returned by a limiter that has been closed.
	ErrClosed = errors.New("limiter: closed")
	// ErrInvalidOptions is wrapped by every [*OptionsError].
	ErrInvalidOptions = errors.New("limiter: invalid options")
	// ErrOverRelease is returned by [Concurrency.Release] when more permits
	// are released than are currently held.
	ErrOverRelease = errors.New("limiter: release exceeds the permits held")
	// ErrInvalidState is returned by Restore when the state does not fit the
	// limiter's options, or when waiters are queued.
	ErrInvalidState = errors.New("limiter: invalid state")
)

// argumentError is an argument error of an acquisition. The rate-limiting
// grains send it to their callers as an application error (a proxy.Error)
// with its code, which is part of their wire contract and never changes;
// errors.Is matches the two by that code, both ways, so a caller tests for
// one error whether the limiter ran in its process or behind a connection.
type argumentError struct {
	msg  string
	code uint32
}

func (e *argumentError) Error() string { return e.msg }

// ErrorCode returns the code the error travels with.
func (e *argumentError) ErrorCode() uint32 { return e.code }

// Is reports whether target carries the same code, as the error a caller
// receives from a grain does.
func (e *argumentError) Is(target error) bool {
	t, ok := target.(interface{ ErrorCode() uint32 })
	return ok && t.ErrorCode() == e.code
}

// FieldError describes one invalid options field.
type FieldError struct {
	// Field is the name of the options field, such as "PermitLimit".
	Field string
	// Problem says what is wrong, such as "must be greater than 0".
	Problem string
}

// OptionsError is returned by the Validate methods and the constructors. It
// names every invalid field at once and matches [ErrInvalidOptions] with
// errors.Is.
type OptionsError struct {
	// Options is the name of the options type, such as "FixedWindowOptions".
	Options string
	// Fields lists the invalid fields in declaration order.
	Fields []FieldError
}

// Error lists every invalid field.
func (e *OptionsError) Error() string {
	var b strings.Builder
	b.WriteString("limiter: invalid ")
	b.WriteString(e.Options)
	b.WriteString(": ")
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Field)
		b.WriteByte(' ')
		b.WriteString(f.Problem)
	}
	return b.String()
}

// Unwrap returns ErrInvalidOptions.
func (e *OptionsError) Unwrap() error { return ErrInvalidOptions }

// Has reports whether field is among the invalid fields.
func (e *OptionsError) Has(field string) bool {
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

// optionsChecker collects field problems in the order they are checked.
type optionsChecker struct {
	err *OptionsError
	typ string
}

func (c *optionsChecker) fail(field, problem string) {
	if c.err == nil {
		c.err = &OptionsError{Options: c.typ}
	}
	c.err.Fields = append(c.err.Fields, FieldError{Field: field, Problem: problem})
}

func (c *optionsChecker) result() error {
	if c.err == nil {
		return nil
	}
	return c.err
}
