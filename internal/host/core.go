package host

// The activation's life, as a deterministic state machine: core takes
// events (a request arrived, the directory answered, the grain activated,
// deactivation was asked for) and returns effects for the actor shell
// around it to carry out (register, activate, run a request, forward it,
// fail it, deactivate, unregister, finish). It owns no goroutine, lock,
// clock or grain code, so every transition is tested by feeding it events
// (core_test.go), the way raft's RawNode is driven by its Node.
//
//	registering --won--> activating --ok--> active --deactivate--> deactivating --> dead
//	     |                    '--error--> failed
//	     '--lost to another silo--> forwarding
//	     '--directory error--> failed (and unregisters)
//
// Requests that arrive while the activation registers or activates wait
// in the core's queue, and an ask to deactivate waits for it to be
// active. An activation that loses the registration never activates: it
// forwards what it queued, and anything that still reaches it, to the
// winner. A dead activation hands requests back to the router,
// which finds the grain's next activation; a failed one fails them with
// the cause.

type coreState uint8

const (
	stateNew          coreState = iota // created, not yet started
	stateRegistering                   // waiting for the directory
	stateActivating                    // loading state and running OnActivate
	stateActive                        // running requests
	stateDeactivating                  // running OnDeactivate and the final flush
	stateForwarding                    // lost the registration: forwarding to the winner
	stateDead                          // deactivated: requests go back to the router
	stateFailed                        // activation failed: requests fail with the cause
)

var coreStateNames = [...]string{"new", "registering", "activating", "active", "deactivating", "forwarding", "dead", "failed"}

func (s coreState) String() string { return coreStateNames[s] }

type effectKind uint8

const (
	effRegister   effectKind = iota + 1 // ask the directory to register this activation
	effActivate                         // load state and run OnActivate, then report evActivated
	effRun                              // run req's turn
	effForward                          // send req to the winning silo (effect.silo)
	effReroute                          // hand req back to the router
	effFail                             // answer req with the activation's failure
	effDeactivate                       // stop timers, OnDeactivate, final flush
	effUnregister                       // remove this activation from the directory
	effFinish                           // leave the host's catalog and stop the actor
	effAsked                            // feed the core deactivateAsked: a deactivation waited for the activation
)

// effect is one thing the shell must do, in order.
type effect struct {
	kind effectKind
	req  *Request
	silo string
}

// core is the state machine of one activation. Only the activation's turns
// touch it.
//
// A request, the event of every call, yields at most one effect, returned
// by value, so the path every call takes allocates nothing. The other
// events, a few in an activation's life, return a fresh slice of effects:
// the shell may feed the core more events (a turn that asks to
// deactivate) while it is still carrying out an earlier step's effects.
type core struct {
	state  coreState
	queue  []*Request // requests waiting for the activation to become active
	winner string     // the silo that won the registration, when forwarding
	reason string     // why the activation deactivated or failed
	asked  string     // why a deactivation was asked for before the activation was active

	effects []effect // the step being built
}

func (c *core) begin() { c.effects = nil }

func (c *core) emit(kind effectKind, req *Request) {
	c.effects = append(c.effects, effect{kind: kind, req: req, silo: c.winner})
}

// start is the activation's first event: it registers in the directory.
func (c *core) start() []effect {
	c.begin()
	if c.state == stateNew {
		c.state = stateRegistering
		c.emit(effRegister, nil)
	}
	return c.effects
}

// request is a request reaching the activation. It returns the effect to
// carry out, or one of kind 0 when the request waits in the queue.
func (c *core) request(req *Request) effect {
	switch c.state {
	case stateActive:
		return effect{kind: effRun, req: req}
	case stateNew, stateRegistering, stateActivating:
		c.queue = append(c.queue, req)
		return effect{}
	case stateForwarding:
		return effect{kind: effForward, req: req, silo: c.winner}
	case stateFailed:
		return effect{kind: effFail, req: req}
	default: // deactivating (never seen: it happens within one step) or dead
		return effect{kind: effReroute, req: req}
	}
}

// registered is the directory's answer: winner is "" when this activation
// won, else the silo that holds the grain's activation; err means the
// directory could not be reached.
func (c *core) registered(winner string, err error) []effect {
	c.begin()
	if c.state != stateRegistering {
		return c.effects
	}
	switch {
	case err != nil:
		// The owner may have recorded the registration and its answer been
		// lost (a timeout, a link that closed): unregistering frees the
		// entry, which would otherwise point at an activation that never
		// runs, until this silo leaves.
		c.state, c.reason = stateFailed, "registration failed"
		c.drain(effFail)
		c.emit(effUnregister, nil)
		c.emit(effFinish, nil)
	case winner != "":
		c.state, c.winner, c.reason = stateForwarding, winner, "duplicate"
		c.drain(effForward)
		c.emit(effFinish, nil)
	default:
		c.state = stateActivating
		c.emit(effActivate, nil)
	}
	return c.effects
}

// activated is the outcome of loading state and OnActivate.
func (c *core) activated(err error) []effect {
	c.begin()
	if c.state != stateActivating {
		return c.effects
	}
	if err != nil {
		c.state, c.reason = stateFailed, "activation failed"
		c.drain(effFail)
		c.emit(effUnregister, nil)
		c.emit(effFinish, nil)
		return c.effects
	}
	c.state = stateActive
	c.drain(effRun)
	if c.asked != "" {
		// After the requests that waited: they arrived before the ask.
		c.emit(effAsked, nil)
	}
	return c.effects
}

// deactivate asks an active activation to deactivate. One that is still
// registering or activating deactivates once it is active (a stopping
// host asks only once); in any other state it is ignored (one that never
// activated has nothing to close).
func (c *core) deactivate(reason string) []effect {
	c.begin()
	switch c.state {
	case stateNew, stateRegistering, stateActivating:
		if c.asked == "" {
			c.asked = reason
		}
		return c.effects
	case stateActive:
	default:
		return c.effects
	}
	c.state, c.reason = stateDeactivating, reason
	c.emit(effDeactivate, nil)
	c.emit(effUnregister, nil)
	c.emit(effFinish, nil)
	c.state = stateDead
	return c.effects
}

// deactivateAsked carries out the deactivation asked for before the
// activation was active (effAsked).
func (c *core) deactivateAsked() []effect {
	reason := c.asked
	c.asked = ""
	if reason == "" {
		c.begin()
		return c.effects
	}
	return c.deactivate(reason)
}

// drain emits kind for every queued request, in arrival order.
func (c *core) drain(kind effectKind) {
	for i, req := range c.queue {
		c.emit(kind, req)
		c.queue[i] = nil
	}
	c.queue = c.queue[:0]
}

// active reports whether requests run now.
func (c *core) active() bool { return c.state == stateActive }

// claims reports whether the activation holds the grain's registration in
// the directory, or may: it asked and has not heard back (the owner may
// have decided for it and died before answering), or it won and is still
// activating, or it is active. A directory that rebuilds a range after its
// owner died must count these, not only the active ones: one that is
// still activating serves soon, and a second activation placed meanwhile
// would serve beside it.
func (c *core) claims() bool {
	switch c.state {
	case stateRegistering, stateActivating, stateActive:
		return true
	}
	return false
}
