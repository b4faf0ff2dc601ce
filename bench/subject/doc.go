// Package subject is the system under test of the harness: granary's
// rate-limiting grains, driven through ratelimit's holders exactly as a
// user drives them, on a Topology.
//
// The measured topology (Cluster) is bench.md's: two silos in one process
// over loopback (the testcluster fixture), only silo 0 a gateway, every
// measured grain placed on silo 0 by a placement hint on the call that
// activates it, which no later call carries.
//
// One operation is what the reference harness measures: AcquireAndConfigure
// for one permit under options bound to the holder (Quota permits, a
// one-hour window, no automatic replenishment, no queue), a check that it
// was granted, then Release, except in the abandoned scenario.
package subject
