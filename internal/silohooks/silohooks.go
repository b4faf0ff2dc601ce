// Package silohooks is what a silo offers granary's own packages and no
// user: the test kit stops a silo as a crash would, and a grain library
// (grains/ratelimit) reports its instruments through the meter provider of
// the silo it is registered on.
//
// A silo embeds Hooks under an unexported name and fills them in with Init
// when it is built; the others reach them through the silo they were given
// (a proxy.Registrar, a *silo.Silo), so the hooks are typed, belong to one
// silo and need no global state. The package imports nothing of the
// server, so that a library whose clients link it (grains/ratelimit) links
// no silo.
package silohooks

// Hooks are one silo's hooks. The zero value has none.
type Hooks struct {
	kill               func()
	attachAcquisitions func(read func() Acquisitions) (bool, error)
}

// Silo is implemented by a type that embeds Hooks, and only by such a
// type: a silo.
type Silo interface{ siloHooks() *Hooks }

func (h *Hooks) siloHooks() *Hooks { return h }

// Funcs are the functions Init gives a silo's hooks.
type Funcs struct {
	// Kill stops the silo as a crash would: its membership and links die
	// without a goodbye.
	Kill func()
	// AttachAcquisitions reports the limiter instruments beside the
	// silo's own, reading read at each collection, until the silo stops.
	// It reports false, doing nothing, when the silo has no meter
	// provider or has stopped.
	AttachAcquisitions func(read func() Acquisitions) (bool, error)
}

// Init sets h's functions; the silo that embeds h calls it once, when it
// is built.
func Init(h *Hooks, f Funcs) {
	h.kill, h.attachAcquisitions = f.Kill, f.AttachAcquisitions
}

// Kill stops s as a crash would. It does nothing to a silo whose hooks
// were never set.
func Kill(s Silo) {
	if h := s.siloHooks(); h.kill != nil {
		h.kill()
	}
}

// Acquisitions are what a silo's limiter grains answered to acquisitions,
// as grains/ratelimit counts them (ratelimit.SiloStats): the silo reports
// them beside its own instruments. It cannot read them itself: the silo
// knows nothing of rate limiting.
type Acquisitions struct {
	Granted, Rejected, Expired, Cancelled uint64 // how acquisitions ended
	Queued                                uint64 // acquisitions that waited; each also ends as one of the above
	Waiting                               int64  // the calls the limiter grains hold now
}

// AttachAcquisitions has s, when it has a meter provider, report the
// limiter instruments, reading read at each collection, until it stops.
// It reports false, doing nothing, when s has no meter provider or has
// stopped.
func AttachAcquisitions(s Silo, read func() Acquisitions) (bool, error) {
	if h := s.siloHooks(); h.attachAcquisitions != nil {
		return h.attachAcquisitions(read)
	}
	return false, nil
}
