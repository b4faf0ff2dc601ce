// Package echo is the bare request/response peer that benchmarks use as the
// transport ceiling: the same framed connections as the cluster, with no
// envelope, no dispatch and no grains. Server answers each frame inline on the
// connection's reader goroutine; Client multiplexes concurrent calls over one
// connection by a call id, with the per-call bookkeeping any serious RPC client
// pays (a pending map and a pooled reply channel per call).
//
// A request body is an 8-byte big-endian call id followed by the payload; the
// reply is the same bytes.
package echo
