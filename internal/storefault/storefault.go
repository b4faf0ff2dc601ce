package storefault

import (
	"context"
	"fmt"
	"sync"
)

// Op names one store operation, for fault injection.
type Op int

// The store operations a Store can fail.
const (
	OpRead Op = iota
	OpWrite
	OpDelete
	numOps
)

// String returns the operation's method name.
func (op Op) String() string {
	switch op {
	case OpRead:
		return "Read"
	case OpWrite:
		return "Write"
	case OpDelete:
		return "Delete"
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// Backend is the store a Store wraps: the method set of persistence.Store,
// with its key type as a parameter.
type Backend[K any] interface {
	Read(ctx context.Context, key K) (data []byte, etag string, err error)
	Write(ctx context.Context, key K, data []byte, etag string) (newETag string, err error)
	Delete(ctx context.Context, key K, etag string) error
}

// Store wraps a Backend and fails chosen calls. An injected failure never
// reaches the backend: the operation did not happen. It is safe for
// concurrent use.
type Store[K any] struct {
	inner Backend[K]
	mu    struct {
		sync.Mutex
		faults [numOps]fault
		calls  [numOps]int
	}
}

type fault struct {
	remaining int
	err       error
}

// New returns a Store that passes every call to inner until told to fail.
func New[K any](inner Backend[K]) *Store[K] { return &Store[K]{inner: inner} }

// FailNext makes the next n calls of op return err, replacing any failure
// still pending for op. n <= 0 cancels pending failures. It panics if op is
// not one of OpRead, OpWrite and OpDelete or if err is nil and n > 0.
func (s *Store[K]) FailNext(op Op, n int, err error) {
	if op < 0 || op >= numOps {
		panic(fmt.Sprintf("storefault: FailNext with unknown %v", op))
	}
	if n > 0 && err == nil {
		panic("storefault: FailNext with a nil error")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.faults[op] = fault{remaining: max(n, 0), err: err}
}

// Calls reports how many times op was called, failed or not.
func (s *Store[K]) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.calls[op]
}

func (s *Store[K]) injected(op Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.calls[op]++
	f := &s.mu.faults[op]
	if f.remaining == 0 {
		return nil
	}
	f.remaining--
	return f.err
}

// Read fails if a Read failure is pending, else reads from the backend.
func (s *Store[K]) Read(ctx context.Context, key K) ([]byte, string, error) {
	if err := s.injected(OpRead); err != nil {
		return nil, "", err
	}
	return s.inner.Read(ctx, key)
}

// Write fails if a Write failure is pending, else writes to the backend.
func (s *Store[K]) Write(ctx context.Context, key K, data []byte, etag string) (string, error) {
	if err := s.injected(OpWrite); err != nil {
		return "", err
	}
	return s.inner.Write(ctx, key, data, etag)
}

// Delete fails if a Delete failure is pending, else deletes from the
// backend.
func (s *Store[K]) Delete(ctx context.Context, key K, etag string) error {
	if err := s.injected(OpDelete); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key, etag)
}
