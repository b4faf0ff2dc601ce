// Package quota is the deterministic core of leased quota: the grain
// side's allocator, which sizes the slices of a hot key's quota it hands
// to holders by a fair-share rule, and the holder side's bookkeeping,
// which answers acquisitions from a slice, asks for the next one ahead of
// need, and gives back what it did not use. Both are state machines in
// the style of internal/host's core: events in (a request, a reply, an
// acquisition, the time), decisions out; no goroutine, lock, clock or
// grain code, so tests drive every transition by feeding events.
//
// # The contract
//
// A slice is permits the limiter grain charged to its algorithm at once,
// as one grant, and that the holder may answer acquisitions with until
// the end of the replenishment interval it was charged in: the window of a
// fixed window, the segment of a sliding window, the period of a token
// bucket (all with automatic replenishment). Nothing replenishes inside
// an interval, so a grant the holder makes later in that interval is one
// the exact limiter could have made at that later time. The grain never
// hands out more than its algorithm has free, so the local answers of all
// holders together stay within the algorithm's own bound:
//
//   - fixed window: at most PermitLimit granted in each window;
//   - sliding window: at most PermitLimit granted in any SegmentsPerWindow
//     consecutive segments;
//   - token bucket: over any run of whole periods, at most the tokens at
//     its start plus TokensPerPeriod for each period.
//
// The overshoot over the exact limiter is therefore zero, on three
// conditions the grain and holder keep: the holder stops using a slice at
// its deadline, reckoned on its own clock from when it sent the request
// (so network latency only shortens a slice), less a margin of 1% for
// clocks that run at different rates; the grain stores its state before
// it answers with a slice, so a new activation after a crash or a move
// counts every slice issued before; and the slice is charged to the
// algorithm, so its permits come back by the algorithm's own rule, as a
// grant's do. What leased quota gives up is fairness and freshness within
// an interval: permits a holder took and did not use are lost to the
// others until the interval ends (unless it returns them), and a holder
// answers rejections locally until its slice's interval ends even when
// another holder returned permits meanwhile.
//
// # Fair share
//
// The allocator keeps, per holder, the demand it reported (permits per
// second, turned into permits per interval) and what it was granted in
// the current interval. A request gets what brings the holder to its
// max-min fair share of the interval's quota (what is free plus what was
// granted in it) among the claims of the holders active in the last two
// intervals, as Doorman's FairShare divides a resource's capacity: claims
// below the water level are met, the others get the level. When every
// claim fits, the quota beyond the claims is split evenly among the
// active holders, so that what nobody claims is not kept from a holder
// whose demand grew. A slice holds no more than the holder's demand over a
// quarter of a second (SliceHorizon, Doorman's refresh interval in
// effect): the holder comes back for more, and what it has not asked for
// stays in the grain for the holders that arrive later in a long
// interval. A request always gets at least the permits of the
// acquisitions it carries (the one that made the holder ask, and those
// expected while the answer travels), when they are free, as per-call
// acquisitions would.
package quota
