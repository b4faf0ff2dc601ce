// Package silohost gives granary's own server-side packages what package
// silo offers no user and what names the activation host's types: the
// host itself (the test kit, the dashboard), and serving and calling
// system services over the links between silos (the dashboard's
// cluster-wide statistics). A silo embeds Hooks under an
// unexported name and sets them with Init when it is built, as it does
// internal/silohooks; this package is apart from those because it links
// the host, which grain libraries must not.
package silohost

import (
	"context"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// Hooks are one silo's server-side hooks. The zero value has none.
type Hooks struct {
	f Funcs
}

// Silo is implemented by a type that embeds Hooks, and only by such a
// type: a silo.
type Silo interface{ siloHost() *Hooks }

func (h *Hooks) siloHost() *Hooks { return h }

// Funcs are the functions Init gives a silo's hooks.
type Funcs struct {
	// Host returns the silo's activation host, nil before it started.
	Host func() *host.Host
	// ServeSystem routes the requests other silos send to serviceType (a
	// grain type no grain has) to serve; see the package function.
	ServeSystem func(serviceType string, serve func(req *host.Request)) error
	// PeerCaller returns a caller that reaches the silo named peer over
	// the link to it, dialling it within ctx when there is none.
	PeerCaller func(ctx context.Context, peer string) (proxy.Caller, error)
}

// Init sets h's functions; the silo that embeds h calls it once, when it
// is built.
func Init(h *Hooks, f Funcs) { h.f = f }

// Host returns the activation host of s, or nil before s started (or
// when its hooks were never set).
func Host(s Silo) *host.Host {
	if h := s.siloHost(); h.f.Host != nil {
		return h.f.Host()
	}
	return nil
}

// errNoHooks is returned for a silo whose hooks were never set.
var errNoHooks = errorString("silohost: the silo set no hooks")

type errorString string

func (e errorString) Error() string { return string(e) }

// ServeSystem routes the requests other silos send to serviceType (a
// grain type no grain has) on s to serve. Clients never reach it. serve
// runs on the goroutine that delivers the request and must not block: it
// answers through req.Reply, then calls req.Release, now or later. It
// fails once s has started, and for a type served already.
func ServeSystem(s Silo, serviceType string, serve func(req *host.Request)) error {
	if h := s.siloHost(); h.f.ServeSystem != nil {
		return h.f.ServeSystem(serviceType, serve)
	}
	return errNoHooks
}

// PeerCaller returns a caller that reaches the silo named peer over the
// link of s to it, dialling it within ctx when there is none: for calls to
// peer's system services.
func PeerCaller(ctx context.Context, s Silo, peer string) (proxy.Caller, error) {
	if h := s.siloHost(); h.f.PeerCaller != nil {
		return h.f.PeerCaller(ctx, peer)
	}
	return nil, errNoHooks
}
