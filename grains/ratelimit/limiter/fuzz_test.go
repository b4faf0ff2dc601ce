package limiter

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzOptions checks that validation never panics, that the constructors
// agree with Validate, and that a valid limiter works at once.
func FuzzOptions(f *testing.F) {
	f.Add(uint8(0), int64(1), int64(0), int64(1), uint8(0), int64(time.Second), false)
	f.Add(uint8(1), int64(0), int64(-1), int64(0), uint8(3), int64(0), true)
	f.Add(uint8(2), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), uint8(1), int64(math.MaxInt64), false)
	f.Add(uint8(2), int64(5), int64(2), int64(3), uint8(0), int64(2*time.Millisecond), false)
	f.Add(uint8(3), int64(10), int64(5), int64(20), uint8(1), int64(time.Millisecond-1), true)
	f.Add(uint8(3), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), uint8(255), int64(math.MinInt64), false)
	f.Fuzz(func(t *testing.T, alg uint8, limit, queue, extra int64, order uint8, period int64, manual bool) {
		var (
			validateErr error
			core        Core
			err         error
		)
		// The sliding window's segment count sizes an allocation; keep
		// valid counts small so the fuzzer does not run out of memory.
		segments := extra
		if segments > 1<<12 {
			segments = 1<<12 + segments%7
		}
		switch alg % 4 {
		case 0:
			o := ConcurrencyOptions{PermitLimit: limit, QueueLimit: queue, QueueOrder: QueueOrder(order)}
			validateErr = o.Validate()
			core, err = NewConcurrency(o, t0)
		case 1:
			o := FixedWindowOptions{PermitLimit: limit, QueueLimit: queue, QueueOrder: QueueOrder(order), Window: time.Duration(period), ManualReplenishment: manual}
			validateErr = o.Validate()
			core, err = NewFixedWindow(o, t0)
		case 2:
			o := SlidingWindowOptions{PermitLimit: limit, SegmentsPerWindow: segments, QueueLimit: queue, QueueOrder: QueueOrder(order),
				Window: time.Duration(period), ManualReplenishment: manual}
			validateErr = o.Validate()
			core, err = NewSlidingWindow(o, t0)
		case 3:
			o := TokenBucketOptions{TokenLimit: limit, TokensPerPeriod: extra, QueueLimit: queue, QueueOrder: QueueOrder(order),
				ReplenishmentPeriod: time.Duration(period), ManualReplenishment: manual}
			validateErr = o.Validate()
			core, err = NewTokenBucket(o, t0)
		}
		if validateErr != nil {
			var oe *OptionsError
			if !errors.As(validateErr, &oe) || len(oe.Fields) == 0 || !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("invalid options: Validate %v, constructor %v", validateErr, err)
			}
			if limit > 0 && queue >= 0 && order <= 1 && period >= int64(MinPeriod) && (alg%4 == 0 || alg%4 == 1) {
				t.Fatalf("valid options rejected: %v", validateErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("Validate passed but the constructor failed: %v", err)
		}
		if limit <= 0 || queue < 0 || order > 1 {
			t.Fatalf("invalid options accepted")
		}
		s, err := core.Statistics()
		if err != nil || s.AvailablePermits != limit {
			t.Fatalf("fresh limiter: %+v %v", s, err)
		}
		l, err := core.AttemptAcquire(t0, limit)
		if err != nil || !l.Acquired() {
			t.Fatalf("acquiring the whole limit: %v %v", l, err)
		}
		if _, need := core.NextTick(t0); need != (alg%4 != 0 && !manual) {
			t.Fatalf("NextTick need %v", need)
		}
		core.Tick(t0.Add(time.Duration(period)))
		core.Close(t0)
	})
}

// byteSource feeds a fuzzer's bytes to math/rand/v2, so that the fuzzer
// steers the choices of the operation runner. Once the bytes run out it
// continues with a fixed PCG stream: a constant stream would make
// rand's rejection sampling loop forever.
type byteSource struct {
	data []byte
	rest rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.data)
	s.data = s.data[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// FuzzOperations runs fuzzer-chosen configurations and operation sequences
// against the model, with every invariant checked after each step.
func FuzzOperations(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte("fixed window with a few operations in it"))
	f.Add(uint8(2), []byte("sliding window: acquire, cancel, replenish, acquire again and again"))
	f.Add(uint8(3), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, seed))
		data := make([]byte, 512)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		f.Add(uint8(seed), data)
	}
	f.Fuzz(func(t *testing.T, alg uint8, data []byte) {
		if len(data) > 1<<14 {
			data = data[:1<<14]
		}
		steps := len(data) / 4
		r := rand.New(&byteSource{data: data, rest: *rand.NewPCG(1, 2)})
		cfg := randomConfig(r, algorithm(alg%4)+algorithmConcurrency)
		rn := newRunner(t, r, cfg)
		for rn.step = 0; rn.step < steps; rn.step++ {
			rn.operate()
			rn.checkInvariants()
		}
	})
}
