// Package dashboard is the silo's web page: the cluster's members with
// their state, generation and load; this silo's activations by grain type;
// its grain calls with rates and latencies, read from the silo's own
// instruments; its limiters' totals; and, where the rights allow, its
// hottest limiter keys with their utilization, refusals and queues. The
// page polls a JSON snapshot and draws it; its assets are embedded, so it
// needs nothing from outside the silo.
//
// The page is read-only. What it shows follows the ports' rights
// (docs/operations.md, "The dashboard"): on the public HTTP port, only
// what /cluster and /metrics already show (the keys of the limiters,
// which are often user names or addresses, are left out); on the admin
// port, the hottest keys too.
//
// A snapshot is built at most once per Options.MinInterval, whoever asks,
// so that many open pages cost the silo as much as one. Finding the
// hottest keys asks each active limiter grain of the silo for its
// statistics and configuration, up to Options.MaxKeys of them: those calls
// are grain calls, and count in the call totals the page shows.
package dashboard
