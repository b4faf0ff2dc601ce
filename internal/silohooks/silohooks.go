// Package silohooks gives internal packages what package silo offers no
// user: stopping a silo as a crash would (the test kit, testcluster), and
// serving and calling system services over the links between silos (the
// dashboard's cluster-wide statistics). Package silo sets the hooks when
// it is initialised.
package silohooks

import (
	"context"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// Kill stops the silo s (a *silo.Silo) as a crash would: its membership
// and links die without a goodbye.
var Kill func(s any)

// ServeSystem routes the requests other silos send to serviceType (a
// grain type no grain has) on the silo s (a *silo.Silo) to serve. Clients
// never reach it. serve runs on the goroutine that delivers the request
// and must not block: it answers through req.Reply, then calls
// req.Release, now or later. It fails once s has started, and for a type
// served already.
var ServeSystem func(s any, serviceType string, serve func(req *host.Request)) error

// PeerCaller returns a caller that reaches the silo named peer over the
// link of s (a *silo.Silo) to it, dialling it within ctx when there is
// none: for calls to peer's system services.
var PeerCaller func(ctx context.Context, s any, peer string) (proxy.Caller, error)
