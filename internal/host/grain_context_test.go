package host

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/proxy"
)

// owner is a Host's owner for tests: it only has a caller.
type owner struct{ caller proxy.Caller }

func (o owner) Caller() proxy.Caller { return o.caller }

// nopCaller is a proxy.Caller that answers nothing.
type nopCaller struct{}

func (nopCaller) Call(context.Context, proxy.Call, proto.Message, proto.Message) error { return nil }
func (nopCaller) ResponseTimeout() time.Duration                                       { return time.Second }

// CallerOf reaches the caller of the owner of the host that runs the
// activation, and nothing for a host without an owner or a Context no
// host made.
func TestCallerOfReachesTheHostsOwner(t *testing.T) {
	var caller proxy.Caller = &nopCaller{}
	owned := newFixture(t, HostOptions{}, WithOwner(owner{caller: caller}))
	ownerless := newFixture(t, HostOptions{})
	for _, c := range []struct {
		name string
		f    *fixture
		want proxy.Caller
	}{{"owned", owned, caller}, {"ownerless", ownerless, nil}} {
		_, err := c.f.call("a", mAdd, 1)
		require.NoError(t, err)
		c.f.host.mu.RLock()
		a := c.f.host.mu.acts.get(actor.GrainID{Type: testType, Key: "a"})
		c.f.host.mu.RUnlock()
		require.NotNil(t, a, c.name)
		assert.Equal(t, c.want, CallerOf(a.gc), c.name)
		assert.Equal(t, actor.GrainID{Type: testType, Key: "a"}, a.gc.ID(), c.name)
	}
	assert.Nil(t, CallerOf(new(actor.Context)), "a Context no host made")
}
