package limiter

import (
	"fmt"
	"time"
)

// MinPeriod is the shortest replenishment period a limiter accepts: a
// window, a sliding-window segment (Window / SegmentsPerWindow) or a token
// bucket's ReplenishmentPeriod. Shorter periods cannot be driven by a timer
// reliably, so they are rejected rather than silently misbehaving.
const MinPeriod = time.Millisecond

// MaxSegmentsPerWindow bounds SlidingWindowOptions.SegmentsPerWindow. A
// sliding window keeps one counter per segment, so without a bound a long
// Window could ask for terabytes; System.Threading.RateLimiting has no
// bound and fails with out-of-memory instead.
const MaxSegmentsPerWindow = 1 << 16

// QueueOrder says which queued request is served first when permits become
// available. New requests are always appended at the tail of the queue.
type QueueOrder uint8

const (
	// OldestFirst serves the queue from its head (FIFO). While anything is
	// queued, a new request is never served ahead of the waiters.
	OldestFirst QueueOrder = iota
	// NewestFirst serves the queue from its tail (LIFO). A new request is
	// served at once whenever permits allow, and a full queue evicts its
	// oldest waiters to make room.
	NewestFirst
)

// String returns "OldestFirst" or "NewestFirst".
func (o QueueOrder) String() string {
	switch o {
	case OldestFirst:
		return "OldestFirst"
	case NewestFirst:
		return "NewestFirst"
	}
	return fmt.Sprintf("QueueOrder(%d)", uint8(o))
}

func (o QueueOrder) valid() bool { return o <= NewestFirst }

// ConcurrencyOptions configures a [Concurrency] limiter. The zero value is
// not valid: PermitLimit must be set.
type ConcurrencyOptions struct {
	// PermitLimit is the number of permits that may be held at once. It must
	// be greater than 0.
	PermitLimit int64
	// QueueLimit is the total number of permits that queued requests may ask
	// for. It must not be negative; 0 disables queueing of non-zero requests.
	QueueLimit int64
	// QueueOrder chooses which waiter is served first; the default is
	// OldestFirst.
	QueueOrder QueueOrder
	// LeaseTTL is how long a concurrency lease of a limiter grain lives
	// without being renewed: a lease its holder stopped renewing (a client
	// that crashed, a grant whose reply was lost) gives its permits back
	// after it. 0 means DefaultLeaseTTL; otherwise at least MinLeaseTTL.
	// The in-process Limiter and the core ignore it: their leases cannot
	// outlive their holder.
	LeaseTTL time.Duration
}

// DefaultLeaseTTL is the lease time to live of ConcurrencyOptions with a
// zero LeaseTTL: long enough that a holder renewing its leases never
// comes near it, short enough that a dead holder's permits come back.
const DefaultLeaseTTL = 30 * time.Second

// MinLeaseTTL is the shortest LeaseTTL accepted: renewals come every third
// of it, and shorter ones would be mostly renewal traffic.
const MinLeaseTTL = 300 * time.Millisecond

// TTL returns the lease time to live the options mean: LeaseTTL, or
// DefaultLeaseTTL when it is 0.
func (o ConcurrencyOptions) TTL() time.Duration {
	if o.LeaseTTL == 0 {
		return DefaultLeaseTTL
	}
	return o.LeaseTTL
}

// Validate returns nil, or an [*OptionsError] naming every invalid field.
func (o ConcurrencyOptions) Validate() error {
	c := optionsChecker{typ: "ConcurrencyOptions"}
	checkLimit(&c, "PermitLimit", o.PermitLimit)
	checkQueue(&c, o.QueueLimit, o.QueueOrder)
	if o.LeaseTTL != 0 && o.LeaseTTL < MinLeaseTTL {
		c.fail("LeaseTTL", fmt.Sprintf("must be 0 (the default) or at least %v (got %v)", MinLeaseTTL, o.LeaseTTL))
	}
	return c.result()
}

// FixedWindowOptions configures a [FixedWindow] limiter. The zero value is
// not valid: PermitLimit and Window must be set.
type FixedWindowOptions struct {
	// PermitLimit is the number of permits each window grants. It must be
	// greater than 0.
	PermitLimit int64
	// QueueLimit is the total number of permits that queued requests may ask
	// for. It must not be negative; 0 disables queueing of non-zero requests.
	QueueLimit int64
	// QueueOrder chooses which waiter is served first; the default is
	// OldestFirst.
	QueueOrder QueueOrder
	// Window is the length of a window; it must be at least MinPeriod.
	Window time.Duration
	// ManualReplenishment turns off the periodic tick: permits then come
	// back only through TryReplenish. The default (false) is automatic
	// replenishment once per Window.
	ManualReplenishment bool
}

// Validate returns nil, or an [*OptionsError] naming every invalid field.
func (o FixedWindowOptions) Validate() error {
	c := optionsChecker{typ: "FixedWindowOptions"}
	checkLimit(&c, "PermitLimit", o.PermitLimit)
	checkQueue(&c, o.QueueLimit, o.QueueOrder)
	checkPeriod(&c, "Window", o.Window)
	return c.result()
}

// SlidingWindowOptions configures a [SlidingWindow] limiter. The zero value
// is not valid: PermitLimit, SegmentsPerWindow and Window must be set.
type SlidingWindowOptions struct {
	// PermitLimit is the number of permits granted within any window. It
	// must be greater than 0.
	PermitLimit int64
	// SegmentsPerWindow is the number of segments a window is divided into;
	// the window slides by one segment per replenishment. It must be greater
	// than 0 and at most MaxSegmentsPerWindow, and Window / SegmentsPerWindow
	// must be at least MinPeriod.
	SegmentsPerWindow int64
	// QueueLimit is the total number of permits that queued requests may ask
	// for. It must not be negative; 0 disables queueing of non-zero requests.
	QueueLimit int64
	// QueueOrder chooses which waiter is served first; the default is
	// OldestFirst.
	QueueOrder QueueOrder
	// Window is the length of the window; it must be at least MinPeriod.
	Window time.Duration
	// ManualReplenishment turns off the periodic tick: segments then slide
	// only through TryReplenish. The default (false) is automatic
	// replenishment once per Window / SegmentsPerWindow, truncated to whole
	// 100 ns ticks as .NET does.
	ManualReplenishment bool
}

// Validate returns nil, or an [*OptionsError] naming every invalid field.
func (o SlidingWindowOptions) Validate() error {
	c := optionsChecker{typ: "SlidingWindowOptions"}
	checkLimit(&c, "PermitLimit", o.PermitLimit)
	switch {
	case o.SegmentsPerWindow <= 0:
		c.fail("SegmentsPerWindow", fmt.Sprintf("must be greater than 0 (got %d)", o.SegmentsPerWindow))
	case o.SegmentsPerWindow > MaxSegmentsPerWindow:
		c.fail("SegmentsPerWindow", fmt.Sprintf("must be at most %d (got %d)", MaxSegmentsPerWindow, o.SegmentsPerWindow))
	case o.Window >= MinPeriod && o.Window/time.Duration(o.SegmentsPerWindow) < MinPeriod:
		c.fail("SegmentsPerWindow", fmt.Sprintf("must leave segments of at least %v (Window %v / %d)", MinPeriod, o.Window, o.SegmentsPerWindow))
	}
	checkQueue(&c, o.QueueLimit, o.QueueOrder)
	checkPeriod(&c, "Window", o.Window)
	return c.result()
}

// TokenBucketOptions configures a [TokenBucket] limiter. The zero value is
// not valid: TokenLimit, TokensPerPeriod and ReplenishmentPeriod must be set.
type TokenBucketOptions struct {
	// TokenLimit is the bucket's capacity. It must be greater than 0.
	TokenLimit int64
	// TokensPerPeriod is the number of tokens added per ReplenishmentPeriod.
	// It must be greater than 0 and may exceed TokenLimit.
	TokensPerPeriod int64
	// QueueLimit is the total number of tokens that queued requests may ask
	// for. It must not be negative; 0 disables queueing of non-zero requests.
	QueueLimit int64
	// QueueOrder chooses which waiter is served first; the default is
	// OldestFirst.
	QueueOrder QueueOrder
	// ReplenishmentPeriod is the interval between refills; it must be at
	// least MinPeriod.
	ReplenishmentPeriod time.Duration
	// ManualReplenishment turns off the periodic tick: tokens then come back
	// only through TryReplenish, in proportion to the time elapsed. The
	// default (false) adds exactly TokensPerPeriod per tick.
	ManualReplenishment bool
}

// Validate returns nil, or an [*OptionsError] naming every invalid field.
func (o TokenBucketOptions) Validate() error {
	c := optionsChecker{typ: "TokenBucketOptions"}
	checkLimit(&c, "TokenLimit", o.TokenLimit)
	checkLimit(&c, "TokensPerPeriod", o.TokensPerPeriod)
	checkQueue(&c, o.QueueLimit, o.QueueOrder)
	checkPeriod(&c, "ReplenishmentPeriod", o.ReplenishmentPeriod)
	return c.result()
}

func checkLimit(c *optionsChecker, field string, v int64) {
	if v <= 0 {
		c.fail(field, fmt.Sprintf("must be greater than 0 (got %d)", v))
	}
}

func checkQueue(c *optionsChecker, limit int64, order QueueOrder) {
	if limit < 0 {
		c.fail("QueueLimit", fmt.Sprintf("must not be negative (got %d)", limit))
	}
	if !order.valid() {
		c.fail("QueueOrder", fmt.Sprintf("must be OldestFirst or NewestFirst (got %d)", uint8(order)))
	}
}

func checkPeriod(c *optionsChecker, field string, d time.Duration) {
	if d < MinPeriod {
		c.fail(field, fmt.Sprintf("must be at least %v (got %v)", MinPeriod, d))
	}
}
