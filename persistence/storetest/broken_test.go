package storetest_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"

	"github.com/granary-go/granary/persistence"
)

// flawedStore is a small map-based store that keeps the Store contract
// unless told to break one part of it, so that the suite can be shown to
// catch each break.
type flawedStore struct {
	flaw string
	mu   struct {
		sync.Mutex
		entries map[string]flawedEntry
		version int
		perKey  map[string]int // for "reuses-etags-after-delete"
		closed  bool
	}
}

type flawedEntry struct {
	data []byte
	etag string
}

// The flaws, each breaking one rule the suite checks.
var flaws = []string{
	"ignores-etag",
	"unlocked-check",
	"reuses-etags-after-delete",
	"keeps-writer-slice",
	"shares-read-slice",
	"ignores-context",
	"joins-key-parts",
	"loses-empty-values",
	"truncates-large-values",
	"close-does-nothing",
}

func newFlawedStore(flaw string) *flawedStore {
	s := &flawedStore{flaw: flaw}
	s.mu.entries = make(map[string]flawedEntry)
	s.mu.perKey = make(map[string]int)
	return s
}

func (s *flawedStore) mapKey(k persistence.Key) string {
	if s.flaw == "joins-key-parts" {
		return k.GrainType + "/" + k.GrainKey + "/" + k.Name
	}
	return strconv.Quote(k.GrainType) + strconv.Quote(k.GrainKey) + strconv.Quote(k.Name)
}

func (s *flawedStore) check(ctx context.Context) error {
	if s.flaw != "ignores-context" {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed && s.flaw != "close-does-nothing" {
		return persistence.ErrClosed
	}
	return nil
}

func (s *flawedStore) Read(ctx context.Context, k persistence.Key) ([]byte, string, error) {
	if err := s.check(ctx); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.mu.entries[s.mapKey(k)]
	if !ok {
		return nil, "", persistence.ErrNotFound
	}
	if s.flaw == "shares-read-slice" {
		return e.data, e.etag, nil
	}
	return append([]byte{}, e.data...), e.etag, nil
}

func (s *flawedStore) Write(ctx context.Context, k persistence.Key, data []byte, etag string) (string, error) {
	if err := s.check(ctx); err != nil {
		return "", err
	}
	mk := s.mapKey(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	current := s.mu.entries[mk].etag
	if current != etag && s.flaw != "ignores-etag" {
		return "", &persistence.ConflictError{Key: k, Expected: etag, Actual: current}
	}
	if s.flaw == "unlocked-check" {
		// Give other writers holding the same etag the chance to pass the
		// check too before this one writes, as a store without an atomic
		// check-and-set would.
		s.mu.Unlock()
		for range 10 {
			runtime.Gosched()
		}
		s.mu.Lock()
	}
	stored := append([]byte{}, data...)
	switch s.flaw {
	case "keeps-writer-slice":
		stored = data
	case "truncates-large-values":
		stored = stored[:min(len(stored), 64<<10)]
	case "loses-empty-values":
		if len(data) == 0 {
			delete(s.mu.entries, mk)
			return "1", nil
		}
	}
	var newETag string
	if s.flaw == "reuses-etags-after-delete" {
		s.mu.perKey[mk]++
		newETag = strconv.Itoa(s.mu.perKey[mk])
	} else {
		s.mu.version++
		newETag = strconv.Itoa(s.mu.version)
	}
	s.mu.entries[mk] = flawedEntry{data: stored, etag: newETag}
	return newETag, nil
}

func (s *flawedStore) Delete(ctx context.Context, k persistence.Key, etag string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	mk := s.mapKey(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	current := s.mu.entries[mk].etag
	if current != etag && s.flaw != "ignores-etag" {
		return &persistence.ConflictError{Key: k, Expected: etag, Actual: current}
	}
	delete(s.mu.entries, mk)
	delete(s.mu.perKey, mk)
	return nil
}

func (s *flawedStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = true
	return nil
}
