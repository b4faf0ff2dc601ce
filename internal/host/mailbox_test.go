package host

import (
	"fmt"
	"sync"
	"testing"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingInvoker records what a mailbox hands it, in order.
type recordingInvoker struct {
	mu        sync.Mutex
	got       []string
	escalated []any
	onUser    func(msg any)
}

func (r *recordingInvoker) InvokeSystemMessage(msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprint("sys:", msg))
}

func (r *recordingInvoker) InvokeUserMessage(msg any) {
	r.mu.Lock()
	r.got = append(r.got, fmt.Sprint("user:", msg))
	f := r.onUser
	r.mu.Unlock()
	if f != nil {
		f(msg)
	}
}

func (r *recordingInvoker) EscalateFailure(reason, msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.escalated = append(r.escalated, reason)
}

func (r *recordingInvoker) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// manualDispatcher keeps what the mailbox schedules, for the test to run.
type manualDispatcher struct{ scheduled []func() }

func (d *manualDispatcher) Schedule(fn func()) { d.scheduled = append(d.scheduled, fn) }
func (d *manualDispatcher) Throughput() int    { return mailboxThroughput }

func newTestMailbox() (*mailbox, *recordingInvoker, *manualDispatcher) {
	m, inv, d := &mailbox{}, &recordingInvoker{}, &manualDispatcher{}
	m.RegisterHandlers(inv, d)
	return m, inv, d
}

// The mailbox is scheduled once per idle -> busy transition; system
// messages go before user messages; a post to an idle mailbox through
// post hands back its processing instead of scheduling it.
func TestMailboxOrderAndScheduling(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.PostUserMessage("u1")
	m.PostUserMessage("u2")
	m.PostSystemMessage("s1")
	require.Len(t, d.scheduled, 1, "one schedule for a mailbox that was idle")
	assert.Equal(t, 2, m.UserMessageCount())
	d.scheduled[0]()
	assert.Equal(t, []string{"sys:s1", "user:u1", "user:u2"}, inv.seen())
	assert.Zero(t, m.UserMessageCount())

	require.True(t, m.post("u3", false), "an idle mailbox is the poster's to run")
	assert.False(t, m.post("u4", false), "a scheduled one is not")
	m.PostUserMessage("u5")
	assert.Len(t, d.scheduled, 1, "nothing scheduled while the poster owns the run")
	m.process()
	assert.Equal(t, []string{"sys:s1", "user:u1", "user:u2", "user:u3", "user:u4", "user:u5"}, inv.seen())
	assert.True(t, m.post("u6", false), "idle again once drained")
}

// A suspended mailbox runs only system messages until it is resumed.
func TestMailboxSuspension(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.PostSystemMessage(&protoactor.SuspendMailbox{})
	m.PostUserMessage("u1")
	d.scheduled[0]()
	assert.Empty(t, inv.seen(), "user messages wait while suspended")
	assert.Equal(t, 1, m.UserMessageCount())

	m.PostSystemMessage("s1")
	require.Len(t, d.scheduled, 2)
	d.scheduled[1]()
	assert.Equal(t, []string{"sys:s1"}, inv.seen())

	m.PostSystemMessage(&protoactor.ResumeMailbox{})
	require.Len(t, d.scheduled, 3)
	d.scheduled[2]()
	assert.Equal(t, []string{"sys:s1", "user:u1"}, inv.seen())
}

// A panic escaping the actor is escalated and processing goes on with the
// next message, as with protoactor's own mailbox.
func TestMailboxEscalatesPanicsAndGoesOn(t *testing.T) {
	m, inv, d := newTestMailbox()
	inv.onUser = func(msg any) {
		if msg == "boom" {
			panic("boom")
		}
	}
	m.PostUserMessage("u1")
	m.PostUserMessage("boom")
	m.PostUserMessage("u2")
	d.scheduled[0]()
	assert.Equal(t, []string{"user:u1", "user:boom", "user:u2"}, inv.seen())
	assert.Equal(t, []any{"boom"}, inv.escalated)
	assert.True(t, m.post("u3", false), "the mailbox is idle after the run")
}

// A queue that never drains does not keep every message it ever held:
// its live part moves down, and a drained burst lets its array go.
func TestMailboxQueueStaysBounded(t *testing.T) {
	m, _, d := newTestMailbox()
	const backlog = 100
	for i := range backlog {
		m.PostUserMessage(i)
	}
	for i := range 100 * queueKeep {
		msg, system, ok := m.next()
		require.True(t, ok)
		require.False(t, system)
		require.Equal(t, i, msg)
		m.PostUserMessage(backlog + i) // the queue never empties
		require.LessOrEqual(t, cap(m.mu.user), 4*queueKeep, "after %d messages", i)
	}
	assert.Equal(t, backlog, m.UserMessageCount())

	for i := range 10 * queueKeep {
		m.PostUserMessage(i)
	}
	for {
		if _, _, ok := m.next(); !ok {
			break
		}
	}
	assert.Nil(t, m.mu.user, "a drained burst lets its array go")
	assert.Len(t, d.scheduled, 1)
}

// System messages are a few in an activation's life: the mailbox keeps
// their queue only while some wait, in order, and an idle mailbox holds
// none.
func TestMailboxDropsDrainedSystemQueue(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.PostSystemMessage("s1")
	m.PostSystemMessage("s2")
	require.NotNil(t, m.mu.system)
	m.PostUserMessage("u1")
	d.scheduled[0]()
	assert.Equal(t, []string{"sys:s1", "sys:s2", "user:u1"}, inv.seen())
	assert.Nil(t, m.mu.system, "a drained system queue is let go")
	assert.NotNil(t, m.mu.user, "the user queue keeps its array for the next call")

	m.PostSystemMessage("s3")
	require.Len(t, d.scheduled, 2)
	d.scheduled[1]()
	assert.Equal(t, "sys:s3", inv.seen()[3])
	assert.Nil(t, m.mu.system)
}
