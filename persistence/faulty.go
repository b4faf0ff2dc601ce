package persistence

import (
	"context"
	"fmt"
	"sync"
)

// Op names one Store operation, for fault injection.
type Op int

// The Store operations a FaultyStore can fail.
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

// FaultyStore wraps a Store and fails chosen calls on demand, so that tests
// of any package can exercise retry and error paths against a real store.
// An injected failure never reaches the inner store: the operation did not
// happen. It is safe for concurrent use.
type FaultyStore struct {
	inner Store
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

var _ Store = (*FaultyStore)(nil)

// NewFaultyStore returns a FaultyStore that passes every call to inner until
// told to fail.
func NewFaultyStore(inner Store) *FaultyStore { return &FaultyStore{inner: inner} }

// FailNext makes the next n calls of op return err, replacing any failure
// still pending for op. n <= 0 cancels pending failures. It panics if op is
// not one of OpRead, OpWrite and OpDelete or if err is nil and n > 0.
func (s *FaultyStore) FailNext(op Op, n int, err error) {
	if op < 0 || op >= numOps {
		panic(fmt.Sprintf("persistence: FailNext with unknown %v", op))
	}
	if n > 0 && err == nil {
		panic("persistence: FailNext with a nil error")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.faults[op] = fault{remaining: max(n, 0), err: err}
}

// Calls reports how many times op was called, failed or not.
func (s *FaultyStore) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.calls[op]
}

func (s *FaultyStore) injected(op Op) error {
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

// Read fails if a Read failure is pending, else reads from the inner store.
func (s *FaultyStore) Read(ctx context.Context, key Key) ([]byte, string, error) {
	if err := s.injected(OpRead); err != nil {
		return nil, "", err
	}
	return s.inner.Read(ctx, key)
}

// Write fails if a Write failure is pending, else writes to the inner store.
func (s *FaultyStore) Write(ctx context.Context, key Key, data []byte, etag string) (string, error) {
	if err := s.injected(OpWrite); err != nil {
		return "", err
	}
	return s.inner.Write(ctx, key, data, etag)
}

// Delete fails if a Delete failure is pending, else deletes from the inner
// store.
func (s *FaultyStore) Delete(ctx context.Context, key Key, etag string) error {
	if err := s.injected(OpDelete); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key, etag)
}
