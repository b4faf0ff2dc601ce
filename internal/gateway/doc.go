// Package gateway is a silo's listener for clients: it admits clients
// only, sets each connection up with the rights of the credential its
// client proved and the limits of the silo, shares the silo between the
// busy connections, and keeps the counters of the connections that closed.
//
// Clients only, whether or not the silo is in a cluster: a silo's
// connection bypasses the limits and reaches the system services, so it
// comes in on the listener for links (internal/links), which asks for a
// silo's credential.
package gateway
