package persistence

import (
	"context"
	"strconv"
	"sync"
)

// MemoryStore is a Store that keeps state in process memory: the embedded
// default, and the store for tests. State does not survive the process.
//
// ETags are decimal version numbers drawn from one counter per store, so
// they increase monotonically and are never reused, not even after a delete
// and re-create: a caller holding an ETag from before the delete can never
// match the new value by accident.
//
// A MemoryStore is safe for concurrent use. It copies data on the way in and
// on the way out, so neither the writer nor a reader can change stored bytes.
// The zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu struct {
		sync.Mutex
		entries map[Key]memoryEntry
		version uint64
	}
}

// memoryEntry's data is never modified after it is stored; a write replaces
// the whole entry. That lets Read copy outside the lock.
type memoryEntry struct {
	data []byte
	etag string
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	s := &MemoryStore{}
	s.mu.entries = make(map[Key]memoryEntry)
	return s
}

// Read returns a copy of the state stored under key and its ETag, or
// ErrNotFound.
func (s *MemoryStore) Read(ctx context.Context, key Key) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	e, ok := s.mu.entries[key]
	s.mu.Unlock()
	if !ok {
		return nil, "", ErrNotFound
	}
	data := make([]byte, len(e.data))
	copy(data, e.data)
	return data, e.etag, nil
}

// Write stores a copy of data under key if etag matches the stored ETag ("" if
// nothing is stored) and returns the new ETag; otherwise it returns a
// *ConflictError.
func (s *MemoryStore) Write(ctx context.Context, key Key, data []byte, etag string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	// Copy before locking: the allocation need not serialize writers.
	stored := make([]byte, len(data))
	copy(stored, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	current := s.mu.entries[key].etag
	if current != etag {
		return "", &ConflictError{Key: key, Expected: etag, Actual: current}
	}
	s.mu.version++
	newETag := strconv.FormatUint(s.mu.version, 10)
	s.mu.entries[key] = memoryEntry{data: stored, etag: newETag}
	return newETag, nil
}

// Delete removes the state under key if etag matches the stored ETag ("" if
// nothing is stored); otherwise it returns a *ConflictError.
func (s *MemoryStore) Delete(ctx context.Context, key Key, etag string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	current := s.mu.entries[key].etag
	if current != etag {
		return &ConflictError{Key: key, Expected: etag, Actual: current}
	}
	delete(s.mu.entries, key)
	return nil
}

// Len reports how many states are stored.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.entries)
}
