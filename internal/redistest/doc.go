// Package redistest starts a real redis-server for a test: on a free
// loopback port (or a free port of another address of the test's, such as
// one of a network the test built), with its files in the test's temporary directory, stopped
// when the test ends. A test can stop and restart the server on the same
// port and directory, to play an outage; the data survives the restart
// (append-only file, written on shutdown).
//
// When redis-server is not on PATH, Start skips the test with one line
// saying how to install it, so that a machine without Redis still passes
// every other test; when the environment variable GRANARY_CI is 1, as in
// CI, a missing server fails the test instead.
package redistest
