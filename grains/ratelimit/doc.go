// Package ratelimit gives every service in a granary cluster one limiter
// per key: a concurrency limiter, a fixed window, a sliding window or a
// token bucket, each living in a grain, so that every caller of a key
// shares its quota wherever it runs.
//
// # On the silo
//
// Register the grains before starting the silo:
//
//	s, _ := silo.New(silo.Options{})
//	ratelimit.Register(s, ratelimit.Defaults{}) // library defaults for unconfigured keys
//	s.Start(ctx)
//
// # Anywhere
//
// A holder is the client side of one limiter: build it with a caller (a
// client connected to a gateway, or a silo's own caller) and a key, keep
// it, and acquire:
//
//	login := ratelimit.FixedWindow(client, "login:"+user,
//		ratelimit.FixedWindowOptions{PermitLimit: 5, Window: time.Minute})
//	lease, err := login.Acquire(ctx, 1)
//	if err != nil {
//		return err // the call failed: unavailable silo, cancelled ctx
//	}
//	defer lease.Release(ctx)
//	if !lease.Acquired() {
//		return lease.Err() // an *ExceededError with Reason and RetryAfter
//	}
//
// A rejection is a lease, not an error. Options given to the constructor
// are bound to the holder: every acquisition carries them, and the grain
// reconfigures itself when its options differ. Time-based leases need no
// release (Release sends nothing); concurrency leases hold their permits
// until released.
//
// A service that only holds limiters links none of the server: this
// package imports no silo, and Register reaches the metrics of the silo
// it is given through that silo (examples/limitclient is such a service).
//
// Named configurations (Configs, Named) let holders and middleware refer
// to options by a case-insensitive name; a Group makes several limiters
// one decision, taken at once.
//
// # Hot keys
//
// A holder made with Leased answers a hot time-based key from a slice of
// the limiter's quota, locally, with no call: the grain charges the slice
// to its algorithm at once, sized by fair share among the key's leased
// holders, and the holder uses it until the window, segment or period it
// was charged in ends. The algorithm's bound holds over every holder's
// grants together, with no overshoot; cold keys, queued acquisitions and
// concurrency limiters keep the exact per-call answers. docs/ratelimit.md,
// "Leased quota", says when to use it and what it costs.
//
// # Guarantees and limits
//
// An acquisition waits in the grain's queue for at most its budget: 80% of
// the call's response timeout, or the time left before ctx's deadline when
// that is shorter. The budget starts when the grain method begins, so it
// is not a globally synchronised deadline: activation and routing count
// only against the caller's response timeout. State is snapshotted (every
// 50 ms by default, and at once on configuration changes), so a crash
// loses at most one period. A concurrency lease expires unless its holder
// renews it (holders do, in the background, one Renew per grain every
// third of the LeaseTTL): the permits of a client that crashed come back
// one time to live after its last renewal. TryAcquire answers at once and
// never queues; AcquireMany and Group decide over several limits at once,
// all or nothing, refunding time-based grants where the algorithm can.
// A limiter back at full quota with nothing waiting is collected soon and
// deletes its stored state (unless Configure set its options), and the
// stored state of a time-based limiter expires on Redis after its refill
// time plus a minute: a key nobody calls again leaves nothing behind.
// docs/ratelimit.md is the full manual.
package ratelimit
