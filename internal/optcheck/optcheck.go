// Package optcheck collects the invalid fields of an options struct, so
// that a Validate method reports them all at once, each naming its field.
package optcheck

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Checks collects problems; the zero value with a Prefix is ready to use.
type Checks struct {
	// Prefix starts every message, such as "silo: ".
	Prefix string
	errs   []error
}

// Bad records a problem with the named field.
func (c *Checks) Bad(name, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s%s "+format, append([]any{c.Prefix, name}, args...)...))
}

// Positive checks that d is above zero.
func (c *Checks) Positive(name string, d time.Duration) {
	if d <= 0 {
		c.Bad(name, "must be positive, got %v", d)
	}
}

// NonNegative checks that d is not below zero.
func (c *Checks) NonNegative(name string, d time.Duration) {
	if d < 0 {
		c.Bad(name, "must not be negative, got %v", d)
	}
}

// Address checks a host:port with a numeric port no lower than minPort:
// 0 for an address to listen on (any free port), 1 for one to dial.
func (c *Checks) Address(name, addr string, minPort int) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.Bad(name, "%q: %w", addr, err)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		c.Bad(name, "%q: the port must be a number from %d to 65535", addr, minPort)
	}
}

// Range checks that n lies in [lo, hi].
func (c *Checks) Range(name string, n, lo, hi int) {
	if n < lo || n > hi {
		c.Bad(name, "must be between %d and %d, got %d", lo, hi, n)
	}
}

// Err returns every problem recorded, joined, or nil.
func (c *Checks) Err() error { return errors.Join(c.errs...) }
