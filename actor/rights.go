package actor

import (
	"fmt"
	"strings"
)

// Rights are what a caller may do beyond calling grains: a set of bits,
// granted to a client by its credential (silo.ClientToken) and checked by
// whoever guards an operation (the rate limiters' changes need RightAdmin).
// The zero value grants nothing.
type Rights uint32

// The rights.
const (
	// RightAdmin lets a caller change what the operator configured: the
	// rate limiters' Configure, Reset, DeleteState and TryReplenish.
	RightAdmin Rights = 1 << 0
)

// rightNames are the rights' names in configuration and errors.
var rightNames = []struct {
	right Rights
	name  string
}{{RightAdmin, "admin"}}

// Has reports whether r includes every right of want.
func (r Rights) Has(want Rights) bool { return r&want == want }

// String returns the rights' names joined by commas, "none" for none.
func (r Rights) String() string {
	var names []string
	for _, n := range rightNames {
		if r&n.right != 0 {
			names = append(names, n.name)
			r &^= n.right
		}
	}
	if r != 0 {
		names = append(names, fmt.Sprintf("rights(%#x)", uint32(r)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// ParseRights parses names joined by commas ("admin"); the empty string
// and "none" are no rights.
func ParseRights(s string) (Rights, error) {
	var r Rights
	if s = strings.TrimSpace(s); s == "" || s == "none" {
		return 0, nil
	}
next:
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		for _, n := range rightNames {
			if n.name == name {
				r |= n.right
				continue next
			}
		}
		return 0, fmt.Errorf("actor: unknown right %q (known: admin)", name)
	}
	return r, nil
}
