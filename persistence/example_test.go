package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/granary-go/granary/persistence"
)

// counter stands in for a grain activation. Its turns are serialized by a
// mutex here; a real activation runs them from its mailbox.
type counter struct {
	turn sync.Mutex
	n    int
}

// schedule runs fn as a later turn. A real activation would post fn to its
// mailbox and return false once deactivated.
func (c *counter) schedule(fn func()) bool {
	go func() {
		c.turn.Lock()
		defer c.turn.Unlock()
		fn()
	}()
	return true
}

// snapshot encodes the state; the flusher calls it only inside turns.
func (c *counter) snapshot() ([]byte, error) { return []byte(strconv.Itoa(c.n)), nil }

func Example() {
	ctx := context.Background()
	store := persistence.NewMemoryStore()
	flusher, err := persistence.NewFlusher(store, persistence.FlusherOptions{})
	if err != nil {
		panic(err)
	}
	if err := flusher.Start(ctx); err != nil {
		panic(err)
	}
	defer flusher.Stop(ctx)

	// Activation: load the state, if any.
	key := persistence.Key{GrainType: "counter", GrainKey: "visits", Name: "state"}
	c := &counter{}
	record, data, err := flusher.Open(ctx, key, c.schedule, c.snapshot)
	if err != nil {
		panic(err)
	}
	fmt.Printf("loaded %q\n", data)

	// A turn changes the state and marks it dirty; the next period writes it.
	c.turn.Lock()
	c.n += 3
	record.MarkDirty()
	c.turn.Unlock()

	// Deactivation, also a turn: Close writes what is still dirty.
	c.turn.Lock()
	err = record.Close(ctx)
	c.turn.Unlock()
	if err != nil {
		panic(err)
	}

	stored, etag, _ := store.Read(ctx, key)
	fmt.Printf("stored %q at etag %s\n", stored, etag)
	// Output:
	// loaded ""
	// stored "3" at etag 1
}

func ExampleConflictError() {
	ctx := context.Background()
	store := persistence.NewMemoryStore()
	key := persistence.Key{GrainType: "counter", GrainKey: "visits", Name: "state"}

	etag, _ := store.Write(ctx, key, []byte("1"), "") // create
	_, _ = store.Write(ctx, key, []byte("2"), etag)   // someone else updates

	_, err := store.Write(ctx, key, []byte("stale"), etag)
	var conflict *persistence.ConflictError
	if errors.As(err, &conflict) {
		fmt.Printf("expected %s, stored %s\n", conflict.Expected, conflict.Actual)
	}
	fmt.Println(errors.Is(err, persistence.ErrConflict))
	// Output:
	// expected 1, stored 2
	// true
}
