package rpc

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/wire"
)

// The reader goroutine decodes every reply into an envelope on its stack:
// handing a reply to a waiting call allocates nothing. (A pointer to the
// envelope passed on through an interface once put every frame's envelope
// on the heap.)
func TestHandingAReplyToItsCallAllocatesNothing(t *testing.T) {
	e := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
	t.Cleanup(func() { e.calls.close(ErrNotSent) })
	p := getPending()
	p.call = testCall(time.Hour, false) // as Call sets it: the sweep must not find a call without a method or a timeout
	payload := []byte{8, 1}
	var frame []byte
	answered := 0
	allocs := testing.AllocsPerRun(1000, func() {
		id, err := e.calls.add(p)
		if err != nil {
			return
		}
		reply := wire.Envelope{Kind: wire.KindReply, CallID: id, Payload: payload}
		frame = reply.AppendTo(frame[:0])
		e.HandleFrame(nil, frame)
		<-p.done
		if bytes.Equal(p.payload, payload) {
			answered++
		}
	})
	require.Equal(t, 1001, answered, "every reply reached its call")
	assert.Zero(t, allocs)
}
