// Package placement chooses the silo for a new activation.
//
// Placement runs on the silo that first routes a call for a grain that has
// no activation (the gateway, for a client's call). The caller chooses a
// Strategy per grain type and calls Place with a Request: the grain, the
// live candidate silos with the load figures they publish, the placing
// silo, an optional hint and a random source. Every strategy is a pure
// function of that Request, so it can be tested without a cluster.
//
// The strategies:
//
//   - Random: uniform over the candidates.
//   - PreferLocal: the placing silo when it is a candidate, else random.
//   - HashBased: rendezvous hashing of grain and silo; the same silo on
//     every caller for a fixed membership, and only the grains of a silo
//     that left move elsewhere.
//   - ActivationCount: the power of two choices over published activation
//     counts: the less loaded of two random candidates.
//
// A placement hint (Request.Hint, a silo id carried with the call) overrides
// the strategy when that silo is a candidate, and is ignored otherwise, so a
// hint for a silo that died falls back to the strategy instead of failing
// the call. Tests and benchmarks use hints to pin grains to chosen silos.
package placement
