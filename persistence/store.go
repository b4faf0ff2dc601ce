package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned by Store.Read when no state is stored under the key.
var ErrNotFound = errors.New("persistence: state not found")

// ErrConflict matches every *ConflictError under errors.Is, for callers that
// only need to know that an ETag check failed.
var ErrConflict = errors.New("persistence: etag conflict")

// ErrClosed is returned by operations on a stopped Flusher or a closed
// Record. A Store that has a Close method answers every call after Close
// with an error that matches it.
var ErrClosed = errors.New("persistence: closed")

// Key names one piece of grain state: a grain may keep several named states,
// each stored and versioned on its own.
type Key struct {
	// GrainType is the grain's type (the contract's service name).
	GrainType string
	// GrainKey is the grain's key within its type.
	GrainKey string
	// Name is the state name within the grain.
	Name string
}

// String returns the key as "type/key/name", for logs and errors.
func (k Key) String() string { return k.GrainType + "/" + k.GrainKey + "/" + k.Name }

// ConflictError reports that a write or delete was refused because the
// caller's ETag did not match the stored one. Orleans treats this as proof
// that another activation (or an operator) changed the state, and so should
// the owner: its in-memory state is stale. It matches ErrConflict under
// errors.Is.
type ConflictError struct {
	// Key is the state that was being written or deleted.
	Key Key
	// Expected is the ETag the caller supplied ("" meant "must not exist").
	Expected string
	// Actual is the stored ETag ("" when nothing is stored).
	Actual string
}

// Error describes the conflict.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("persistence: etag conflict on %s: expected %q, stored %q", e.Key, e.Expected, e.Actual)
}

// Is reports whether target is ErrConflict, so that errors.Is(err,
// ErrConflict) holds for every conflict whatever its data.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Store keeps named grain state under optimistic concurrency. Every stored
// value carries an ETag, an opaque version string that changes on every
// write; a write or delete names the ETag it expects and fails with a
// *ConflictError when the stored one differs. The empty ETag means "nothing
// is stored". Implementations are safe for concurrent use, do not retain or
// modify the data slices passed to Write, and return slices from Read that
// the caller owns.
type Store interface {
	// Read returns the stored data and its ETag, or ErrNotFound (possibly
	// wrapped) when nothing is stored under key.
	Read(ctx context.Context, key Key) (data []byte, etag string, err error)
	// Write stores data under key if the stored ETag equals etag (etag ""
	// requires that nothing is stored yet) and returns the new ETag.
	Write(ctx context.Context, key Key, data []byte, etag string) (newETag string, err error)
	// Delete removes the state under key if the stored ETag equals etag.
	// Deleting with etag "" when nothing is stored succeeds and does nothing.
	Delete(ctx context.Context, key Key, etag string) error
}

// ExpiringStore is a Store that can give a stored state a time to live,
// after which the store drops it by itself (persistence/redisstore can).
// A Record whose owner set a time to live (Record.SetTTL) writes through
// WriteExpiring when its flusher's store is one; other stores keep the
// state until it is deleted.
type ExpiringStore interface {
	Store
	// WriteExpiring is Write for a state that is worthless once ttl has
	// passed since the write; a ttl of 0 keeps it until it is deleted.
	WriteExpiring(ctx context.Context, key Key, data []byte, etag string, ttl time.Duration) (newETag string, err error)
}
