package redisstore

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/persistence"
)

// replyError is an error reply from Redis, as go-redis reports it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestFailureSaysWhatACallMayHaveDone(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tt := range []struct {
		name string
		err  error
		want error
		out  outcome
	}{
		{"closed client", redis.ErrClosed, persistence.ErrClosed, notApplied},
		{"refused dial", refused, ErrUnavailable, notApplied},
		{"pool timeout", redis.ErrPoolTimeout, ErrUnavailable, notApplied},
		{"connection reset", reset, ErrUnavailable, inDoubt},
		{"connection closed", io.EOF, ErrUnavailable, inDoubt},
		{"loading", replyError("LOADING Redis is loading the dataset in memory"), ErrUnavailable, notApplied},
		{"replica", replyError("READONLY You can't write against a read only replica."), ErrUnavailable, notApplied},
		{"cluster down", replyError("CLUSTERDOWN The cluster is down"), ErrUnavailable, notApplied},
		{"busy script", replyError("BUSY Redis is busy running a script."), ErrUnavailable, notApplied},
		{"wrong type", replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), ErrCorrupt, notApplied},
		{"wrong password", replyError("WRONGPASS invalid username-password pair or user is disabled."), ErrRejected, notApplied},
		{"out of memory", replyError("OOM command not allowed when used memory > 'maxmemory'."), ErrRejected, notApplied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err, out := failure(context.Background(), "write t/k/s", tt.err)
			assert.ErrorIs(t, err, tt.want)
			assert.ErrorIs(t, err, tt.err, "the cause stays in the chain")
			assert.Equal(t, tt.out, out)
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err, out := failure(ctx, "read t/k/s", io.EOF)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, inDoubt, out, "a call cut short by its context may have run")
}

func TestScriptReplyRefusesStrangeShapes(t *testing.T) {
	ok, etag, err := scriptReply([]any{int64(1), "E"})
	assert.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "E", etag)
	for _, reply := range [][]any{nil, {int64(1)}, {"1", "E"}, {int64(2), "E"}, {int64(0), int64(5)}} {
		_, _, err := scriptReply(reply)
		assert.Error(t, err, "%v", reply)
	}
}
