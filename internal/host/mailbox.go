package host

import (
	"runtime"
	"sync"

	protoactor "github.com/asynkron/protoactor-go/actor"
)

// mailbox is an activation's protoactor mailbox, in place of protoactor's
// default one. It keeps the contract protoactor's actor context relies on
// (system messages before user messages, suspension and resumption, one
// message at a time, a panic escalated to the context and processing
// going on after it, a yield every mailboxThroughput messages) with one
// lock and two slices, and lets the host post to it directly: a request
// reaches its activation without protoactor's root context, process
// lookup, atomic counters, lock-free queue nodes and the closure the
// default mailbox allocates for every wake, and a post that finds the
// mailbox idle hands its processing back to the poster (see post).
// Message batches (protoactor.MessageBatch) are delivered as they are,
// not expanded: nothing in a silo sends one.
type mailbox struct {
	mu struct {
		sync.Mutex
		user     []any
		userHead int
		// system is nil but while system messages wait: they are a few in
		// an activation's life (the start, the stop, a restart), and an
		// idle activation keeps no queue for them.
		system    *systemQueue
		scheduled bool // processing is running or handed to a dispatcher
		suspended bool
	}
	invoker    protoactor.MessageInvoker
	dispatcher protoactor.Dispatcher
	process    func() // m.run, bound once
	// owner is the activation whose mailbox this is, nil for a mailbox
	// under test: a Restart it carries goes through its host's spawner.
	owner *activation
}

var _ protoactor.Mailbox = (*mailbox)(nil)

// systemQueue holds the system messages a mailbox has not yet processed.
type systemQueue struct {
	msgs []any
	head int
}

// post queues msg and reports whether the mailbox was idle: then the
// caller must run m.process (or hand it to a dispatcher) itself.
func (m *mailbox) post(msg any, system bool) (mustRun bool) {
	m.mu.Lock()
	if system {
		if m.mu.system == nil {
			m.mu.system = new(systemQueue)
		}
		m.mu.system.msgs = append(m.mu.system.msgs, msg)
	} else {
		m.mu.user = append(m.mu.user, msg)
	}
	if !m.mu.scheduled {
		m.mu.scheduled = true
		mustRun = true
	}
	m.mu.Unlock()
	return mustRun
}

// pushFront puts msg back at the front of the user queue, to be
// processed before anything queued after it. Only the mailbox's own
// processing calls it (a turn's batch unwinding from a panic), so the
// mailbox is scheduled already.
func (m *mailbox) pushFront(msg any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.userHead > 0 {
		m.mu.userHead--
		m.mu.user[m.mu.userHead] = msg
		return
	}
	m.mu.user = append(m.mu.user, nil)
	copy(m.mu.user[1:], m.mu.user)
	m.mu.user[0] = msg
}

// PostUserMessage implements protoactor's Mailbox.
func (m *mailbox) PostUserMessage(msg any) {
	if m.post(msg, false) {
		m.dispatcher.Schedule(m.process)
	}
}

// PostSystemMessage implements protoactor's Mailbox.
func (m *mailbox) PostSystemMessage(msg any) {
	if m.post(msg, true) {
		m.dispatcher.Schedule(m.process)
	}
}

// RegisterHandlers implements protoactor's Mailbox.
func (m *mailbox) RegisterHandlers(invoker protoactor.MessageInvoker, dispatcher protoactor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.process = m.run
}

// Start implements protoactor's Mailbox.
func (m *mailbox) Start() {}

// UserMessageCount implements protoactor's Mailbox.
func (m *mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.user) - m.mu.userHead
}

// next takes the next message to process: system messages first, user
// messages unless suspended. With none, it marks the mailbox idle.
func (m *mailbox) next() (msg any, system, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if q := m.mu.system; q != nil {
			msg, q.msgs, q.head = take(q.msgs, q.head)
			if len(q.msgs) == 0 {
				m.mu.system = nil
			}
			switch msg.(type) {
			case *protoactor.SuspendMailbox:
				m.mu.suspended = true
				continue
			case *protoactor.ResumeMailbox:
				m.mu.suspended = false
				continue
			}
			return msg, true, true
		}
		if !m.mu.suspended && m.mu.userHead < len(m.mu.user) {
			msg, m.mu.user, m.mu.userHead = take(m.mu.user, m.mu.userHead)
			return msg, false, true
		}
		m.mu.scheduled = false
		return nil, false, false
	}
}

// queueKeep is the capacity a drained queue keeps; a burst's larger array
// is let go once the queue has drained.
const queueKeep = 256

// take removes the message at head from queue q and returns it with the
// queue and head that remain. A drained queue starts over at the front;
// one that never drains moves its live part down once the taken part is
// most of it, so its array does not grow with every message ever queued.
func take(q []any, head int) (any, []any, int) {
	msg := q[head]
	q[head] = nil
	head++
	switch {
	case head == len(q):
		if cap(q) > queueKeep {
			return msg, nil, 0
		}
		return msg, q[:0], 0
	case head >= queueKeep && 2*head >= len(q):
		n := copy(q, q[head:])
		clear(q[n:])
		return msg, q[:n], 0
	}
	return msg, q, head
}

// run processes messages until the mailbox is empty (or suspended with
// no system message), yielding its goroutine every mailboxThroughput
// messages. A panic that escapes the actor is escalated, as protoactor's
// mailbox does, and processing goes on with the next message.
func (m *mailbox) run() {
	for done := false; !done; {
		done = m.runSome()
	}
}

// runSome processes messages until the mailbox is empty (true) or a
// message panicked (false).
func (m *mailbox) runSome() (empty bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for i := 0; ; i++ {
		if i == mailboxThroughput {
			i = 0
			runtime.Gosched()
		}
		var system, ok bool
		if msg, system, ok = m.next(); !ok {
			return true
		}
		switch {
		case !system:
			m.invoker.InvokeUserMessage(msg)
		case m.owner != nil && isRestart(msg):
			m.owner.host.spawner.restart(m.owner, m.invoker, msg)
		default:
			m.invoker.InvokeSystemMessage(msg)
		}
	}
}

func isRestart(msg any) bool {
	_, ok := msg.(*protoactor.Restart)
	return ok
}
