// Package dashboard is the cluster's web page, served by every silo: the
// members with their state, generation and load; the activations per
// grain type and silo; the grain calls with rates and latencies, read
// from the silos' own instruments; the limiters' totals per silo; and,
// where the rights allow, the cluster's hottest limiter keys with their
// utilization, refusals and queues. The page polls a JSON snapshot and
// draws it; its assets are embedded, so it needs nothing from outside the
// silo.
//
// Each silo builds its own part (its activations, calls, limiter totals
// and, when asked, hottest keys) and answers the other silos' requests
// for it over the links between silos, as a system service no client
// reaches (dashboardpb's Stats). The silo that serves a page asks every
// other member for its part in parallel, each within
// Options.PeerTimeout, and shows a silo that does not answer in time, or
// answers out of bounds, as not answering. An answer is bounded in size
// and checked field by field before it is merged.
//
// The page is read-only. What it shows follows the ports' rights
// (docs/operations.md, "The dashboard"): on the public HTTP port, only
// what /cluster and /metrics already show (the keys of the limiters,
// which are often user names or addresses, are left out, and a peer's
// answer that carries keys unasked is refused); on the admin port, the
// hottest keys too.
//
// A silo's part is built at most once per Options.MinInterval with keys
// and once without, whoever asks, and a page's snapshot at most once per
// MinInterval, so that many open pages on many silos cost each silo as
// much as one. Finding the hottest keys asks each active limiter grain of
// the silo for its statistics and configuration, up to Options.MaxKeys of
// them: those calls are grain calls, and count in the call totals the
// page shows.
package dashboard
