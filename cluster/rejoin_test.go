package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRejoinDialsSeedsAndFailedMembersThatAreNotAlive(t *testing.T) {
	now := time.Unix(1700000000, 0)
	r := newRejoinTargets([]string{"127.0.0.1:1", "seed.example:7946"}, time.Minute)
	assert.Equal(t, []string{"127.0.0.1:1", "seed.example:7946"}, r.due(now, nil))
	assert.Equal(t, []string{"seed.example:7946"}, r.due(now, []string{"127.0.0.1:1"}),
		"a seed whose address a live member gossips at is not dialled")
	assert.Equal(t, []string{"seed.example:7946"}, r.due(now, []string{"[::ffff:127.0.0.1]:1"}), "however it is spelt")

	r.memberFailed("c", "127.0.0.1:3", now)
	r.memberFailed("d", "127.0.0.1:1", now) // a seed's address: dialled once
	assert.Equal(t, []string{"127.0.0.1:1", "seed.example:7946", "127.0.0.1:3"}, r.due(now, nil))
	assert.Equal(t, []string{"seed.example:7946"}, r.due(now, []string{"127.0.0.1:1", "127.0.0.1:3"}),
		"a failed member's address taken by a live member (a restart) is not dialled")

	f, ok := r.memberAlive("c")
	assert.True(t, ok)
	assert.Equal(t, failedMember{address: "127.0.0.1:3", since: now}, f)
	_, ok = r.memberAlive("c")
	assert.False(t, ok, "forgotten once alive")
	assert.NotContains(t, r.due(now, nil), "127.0.0.1:3")
}

func TestRejoinForgetsFailedMembersAfterTheWindow(t *testing.T) {
	now := time.Unix(1700000000, 0)
	r := newRejoinTargets(nil, time.Minute)
	r.memberFailed("c", "127.0.0.1:3", now)
	assert.Equal(t, []string{"127.0.0.1:3"}, r.due(now.Add(time.Minute-1), nil))
	assert.Empty(t, r.due(now.Add(time.Minute), nil))
	_, ok := r.memberAlive("c")
	assert.False(t, ok)
}

func TestRejoinRemembersABoundedNumberOfFailedMembers(t *testing.T) {
	now := time.Unix(1700000000, 0)
	r := newRejoinTargets(nil, time.Hour)
	for i := range maxRejoinFailed + 3 {
		r.memberFailed(fmt.Sprintf("m%d", i), fmt.Sprintf("127.0.0.1:%d", 1000+i), now.Add(time.Duration(i)*time.Second))
	}
	due := r.due(now.Add(time.Minute), nil)
	assert.Len(t, due, maxRejoinFailed)
	assert.NotContains(t, due, "127.0.0.1:1000", "the longest failed goes first")
	assert.NotContains(t, due, "127.0.0.1:1002")
	assert.Contains(t, due, "127.0.0.1:1003")
}
