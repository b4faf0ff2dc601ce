package host

import (
	"sync"

	protoactor "github.com/asynkron/protoactor-go/actor"
)

// spawner spawns every activation of a host from one protoactor Props,
// instead of a Props (and two closures) per activation, which an idle
// activation would otherwise keep for as long as it lives.
//
// protoactor asks a Props' producer for the actor when it spawns one and
// again when it restarts one, and asks for the mailbox when it spawns;
// neither producer is told which actor is meant. So the spawner hands the
// activation over: next is set, under mu, around each Spawn and around
// each restart, and the producers read it. Both run on the goroutine that
// holds mu: Spawn calls the producers before it returns, and a restart
// runs inside the activation's own mailbox processing, which hands its
// Restart message to restart (see mailbox.runSome).
type spawner struct {
	mu    sync.Mutex
	next  *activation
	root  *protoactor.RootContext
	props *protoactor.Props
}

func (s *spawner) init(root *protoactor.RootContext, disp protoactor.Dispatcher) {
	s.root = root
	s.props = protoactor.PropsFromProducer(s.actor, protoactor.WithDispatcher(disp), protoactor.WithMailbox(s.mailbox))
}

func (s *spawner) actor() protoactor.Actor { return s.next }

func (s *spawner) mailbox() protoactor.Mailbox { return &s.next.mb }

// spawn starts a's actor.
func (s *spawner) spawn(a *activation) *protoactor.PID {
	a.mb.owner = a
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = a
	pid := s.root.Spawn(s.props)
	s.next = nil
	return pid
}

// restart delivers protoactor's Restart message to a's actor context
// (invoker), which asks
// the producer for the actor again: it gets a, as at the spawn.
func (s *spawner) restart(a *activation, invoker protoactor.MessageInvoker, restart any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = a
	invoker.InvokeSystemMessage(restart)
	s.next = nil
}
