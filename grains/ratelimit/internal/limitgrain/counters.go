package limitgrain

import "sync/atomic"

// Counters count what the limiter grains of one silo answered to
// acquisitions, for the silo's metrics. The grains only add to them, one
// atomic add per outcome, so that counting costs the acquisition path
// nothing more; readers take a Snapshot at any time. The zero value is
// ready to use.
type Counters struct {
	granted   atomic.Uint64
	rejected  atomic.Uint64
	queued    atomic.Uint64
	expired   atomic.Uint64
	cancelled atomic.Uint64
	waiting   atomic.Int64
}

// Snapshot is a reading of Counters; ratelimit.AcquisitionStats, which
// users read, documents each field.
type Snapshot struct {
	Granted, Rejected, Queued, Expired, Cancelled uint64
	Waiting                                       int64
}

// Snapshot reads the counters. Each is read atomically; together they are
// not one instant's reading, which metrics do not need.
func (c *Counters) Snapshot() Snapshot {
	return Snapshot{
		Granted:   c.granted.Load(),
		Rejected:  c.rejected.Load(),
		Queued:    c.queued.Load(),
		Expired:   c.expired.Load(),
		Cancelled: c.cancelled.Load(),
		Waiting:   c.waiting.Load(),
	}
}
