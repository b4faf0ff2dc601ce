package persistence

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
)

func benchRecord(b *testing.B) (*Flusher, *Record) {
	f, err := NewFlusher(NewMemoryStore(), FlusherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	inline := func(fn func()) bool { fn(); return true }
	r, _, err := f.Open(context.Background(), testKey, inline, func() ([]byte, error) { return []byte("state"), nil })
	if err != nil {
		b.Fatal(err)
	}
	return f, r
}

// BenchmarkMarkDirty measures the common case: a turn marks an already
// dirty record.
func BenchmarkMarkDirty(b *testing.B) {
	_, r := benchRecord(b)
	r.MarkDirty()
	b.ReportAllocs()
	for b.Loop() {
		r.MarkDirty()
	}
}

// BenchmarkMarkDirtyClean measures the first change after a flush: the
// record joins the flusher's dirty list.
func BenchmarkMarkDirtyClean(b *testing.B) {
	_, r := benchRecord(b)
	b.ReportAllocs()
	for b.Loop() {
		r.dirty.Store(false) // what a snapshot turn does
		r.MarkDirty()
	}
}

// BenchmarkRecordFlush measures an on-demand flush to the memory store.
func BenchmarkRecordFlush(b *testing.B) {
	_, r := benchRecord(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryStoreWrite(b *testing.B) {
	s := NewMemoryStore()
	ctx := context.Background()
	data := make([]byte, 64)
	etag := ""
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if etag, err = s.Write(ctx, testKey, data, etag); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryStoreWriteParallel(b *testing.B) {
	s := NewMemoryStore()
	ctx := context.Background()
	data := make([]byte, 64)
	b.ReportAllocs()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		// One key per goroutine, as grains rarely share state.
		key := Key{GrainType: "counter", GrainKey: strconv.FormatInt(next.Add(1), 10), Name: "state"}
		etag := ""
		for pb.Next() {
			var err error
			if etag, err = s.Write(ctx, key, data, etag); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMemoryStoreRead(b *testing.B) {
	s := NewMemoryStore()
	ctx := context.Background()
	if _, err := s.Write(ctx, testKey, make([]byte, 64), ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Read(ctx, testKey); err != nil {
			b.Fatal(err)
		}
	}
}
