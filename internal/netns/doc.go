// Package netns builds a throw-away network of Linux network namespaces for
// one test, so that a test can run processes on hosts of their own and cut
// the links between them: real TCP and UDP, real timeouts, no mocks.
//
// The network is a hub namespace holding a bridge, one namespace per node
// joined to the bridge by a veth pair, and one veth pair from the test's own
// namespace to the bridge, so that the test process (its clients, a server it
// starts) reaches every node. Addresses live only on those links, in one
// private /24 of 10.231.0.0/16 chosen at random among those the test's
// namespace does not use: the host's own routes are never touched. Every name
// carries a random suffix, so parallel and stale runs never collide.
//
// New registers a cleanup that deletes every namespace it made, which
// removes their bridge and veth pairs with them. A test binary killed before
// its cleanups ran (a timeout panic, SIGKILL) leaves its namespaces behind;
// the next New deletes those whose creating process is gone.
//
// Cutting a node off uses blackhole routes (packets dropped without a word,
// as on a broken network: connections stall until their timeouts), added in
// the cut node's namespace for the other nodes' addresses and in theirs for
// its address. The hub's and the test's addresses stay reachable, so a
// server the test runs (a store) and the test's clients still reach a cut
// node; CutFromHost also cuts it from the test's address. Down takes a node's
// link down entirely.
//
// New skips the test with one line when it does not run as root or ip(8)
// is missing; under GRANARY_CI=1 it fails instead, since CI runs as root
// and must run these tests.
package netns
