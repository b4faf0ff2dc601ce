package cluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noTime is the time of changes in tests that do not look at Since.
var noTime time.Time

func metaOf(gen int64, status Status, load int64) []byte {
	return encodeMeta(nodeMeta{Generation: gen, Address: "127.0.0.1:11111", Gateway: "127.0.0.1:30000", Status: status, Load: load})
}

func memberOf(id string, gen int64, status Status, load int64) Member {
	return Member{ID: id, Generation: gen, Address: "127.0.0.1:11111", Gateway: "127.0.0.1:30000", Status: status, Load: load, GossipAddress: "127.0.0.1:7946"}
}

// pluck returns one field of each event.
func pluck[T any](events []Event, field func(Event) T) []T {
	out := make([]T, len(events))
	for i, e := range events {
		out[i] = field(e)
	}
	return out
}

func kinds(events []Event) []EventKind {
	return pluck(events, func(e Event) EventKind { return e.Kind })
}

func TestViewJoinsUpdatesAndVersionsMembers(t *testing.T) {
	v := newView(slog.New(slog.DiscardHandler))
	assert.Equal(t, View{}, v.snapshot())

	events := v.alive("b", "127.0.0.1:7946", metaOf(1, StatusJoining, 0), noTime)
	assert.Equal(t, []Event{{EventJoined, memberOf("b", 1, StatusJoining, 0), 1}}, events)
	events = v.alive("a", "127.0.0.1:7946", metaOf(2, StatusJoining, 0), noTime)
	assert.Equal(t, []Event{{EventJoined, memberOf("a", 2, StatusJoining, 0), 2}}, events)

	events = v.alive("b", "127.0.0.1:7946", metaOf(1, StatusActive, 9), noTime)
	assert.Equal(t, []Event{{EventUpdated, memberOf("b", 1, StatusActive, 9), 3}}, events)
	assert.Empty(t, v.alive("b", "127.0.0.1:7946", metaOf(1, StatusActive, 9), noTime), "nothing changed")

	snap := v.snapshot()
	assert.Equal(t, uint64(3), snap.Version)
	assert.Equal(t, []Member{memberOf("a", 2, StatusJoining, 0), memberOf("b", 1, StatusActive, 9)}, snap.Members, "sorted by id")
	got, ok := snap.Member("b")
	require.True(t, ok)
	assert.Equal(t, int64(9), got.Load)
	_, ok = snap.Member("c")
	assert.False(t, ok)
}

func TestViewReportsADepartureAsLeftOnlyAfterANotice(t *testing.T) {
	v := newView(slog.New(slog.DiscardHandler))
	v.alive("a", "127.0.0.1:7946", metaOf(1, StatusActive, 0), noTime)
	v.alive("b", "127.0.0.1:7946", metaOf(1, StatusShuttingDown, 0), noTime)
	v.alive("c", "127.0.0.1:7946", metaOf(5, StatusActive, 0), noTime)

	assert.True(t, v.markLeaving("a", 1))
	assert.False(t, v.markLeaving("c", 4), "a notice from another incarnation")
	assert.False(t, v.markLeaving("nobody", 1))

	assert.Equal(t, []EventKind{EventLeft}, kinds(v.gone("a")))
	assert.Equal(t, []EventKind{EventFailed}, kinds(v.gone("b")), "shutting down without a notice may be a crash")
	assert.Equal(t, []EventKind{EventFailed}, kinds(v.gone("c")))
	assert.Empty(t, v.gone("c"), "already gone")
	assert.Empty(t, v.snapshot().Members)

	// A notice does not outlive the incarnation it was about.
	v.alive("a", "127.0.0.1:7946", metaOf(1, StatusActive, 0), noTime)
	assert.Equal(t, []EventKind{EventFailed}, kinds(v.gone("a")))
}

func TestViewReplacesAnIncarnationThatRestarted(t *testing.T) {
	v := newView(slog.New(slog.DiscardHandler))
	v.alive("a", "127.0.0.1:7946", metaOf(1, StatusActive, 3), noTime)
	events := v.alive("a", "127.0.0.1:7946", metaOf(2, StatusJoining, 0), noTime)
	assert.Equal(t, []Event{
		{EventFailed, memberOf("a", 1, StatusActive, 3), 2},
		{EventJoined, memberOf("a", 2, StatusJoining, 0), 3},
	}, events)

	// The same, after the old incarnation announced a leave.
	v.markLeaving("a", 2)
	assert.Equal(t, []EventKind{EventLeft, EventJoined}, kinds(v.alive("a", "127.0.0.1:7946", metaOf(3, StatusJoining, 0), noTime)))
}

func TestViewIgnoresAnOlderIncarnation(t *testing.T) {
	log, rec := newRecorder()
	v := newView(log)
	v.alive("a", "127.0.0.1:7946", metaOf(5, StatusActive, 0), noTime)
	assert.Empty(t, v.alive("a", "127.0.0.1:7946", metaOf(4, StatusActive, 7), noTime))
	m, _ := v.member("a")
	assert.Equal(t, int64(5), m.Generation)
	assert.Len(t, rec.find(func(r logRecord) bool { return r.level == slog.LevelWarn && r.attrs["member"] == "a" }), 1)
}

func TestViewLeavesOutMembersItCannotRead(t *testing.T) {
	log, rec := newRecorder()
	v := newView(log)
	warnings := func(member string) int {
		return len(rec.find(func(r logRecord) bool { return r.level == slog.LevelWarn && r.attrs["member"] == member }))
	}

	assert.Empty(t, v.alive("garbled", "127.0.0.1:7946", []byte{0xde, 0xad}, noTime))
	assert.Empty(t, v.alive("has space", "127.0.0.1:7946", metaOf(1, StatusActive, 0), noTime))
	assert.Equal(t, 1, warnings("garbled"))
	assert.Equal(t, 1, warnings("has space"))
	assert.Equal(t, uint64(0), v.snapshot().Version)

	// It becomes visible once it publishes something readable.
	assert.Equal(t, []EventKind{EventJoined}, kinds(v.alive("garbled", "127.0.0.1:7946", metaOf(1, StatusActive, 0), noTime)))

	// A visible member that turns unreadable can no longer be trusted.
	assert.Equal(t, []EventKind{EventFailed}, kinds(v.alive("garbled", "127.0.0.1:7946", []byte{metaVersion, 0}, noTime)))
	assert.Equal(t, 2, warnings("garbled"))
	assert.Empty(t, v.snapshot().Members)
}

// A member's Since is when the view began to show it in its status: a
// join, a new status or a new incarnation move it; load and address
// updates do not.
func TestViewTimesEachMembersLastChangeOfStatus(t *testing.T) {
	v := newView(slog.New(slog.DiscardHandler))
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	since := func() time.Time {
		m, ok := v.member("a")
		require.True(t, ok)
		return m.Since
	}

	events := v.alive("a", "127.0.0.1:7946", metaOf(1, StatusJoining, 0), at(0))
	assert.Equal(t, at(0), events[0].Member.Since, "the event carries it")
	assert.Equal(t, at(0), since())

	events = v.alive("a", "127.0.0.1:7946", metaOf(1, StatusActive, 0), at(5))
	assert.Equal(t, []EventKind{EventUpdated}, kinds(events))
	assert.Equal(t, at(5), since(), "announced active")

	assert.Equal(t, []EventKind{EventUpdated}, kinds(v.alive("a", "127.0.0.1:7946", metaOf(1, StatusActive, 7), at(9))))
	assert.Equal(t, []EventKind{EventUpdated}, kinds(v.alive("a", "127.0.0.1:7947", metaOf(1, StatusActive, 7), at(10))))
	assert.Equal(t, at(5), since(), "load and gossip address are no change of status")
	assert.Empty(t, v.alive("a", "127.0.0.1:7947", metaOf(1, StatusActive, 7), at(11)), "nothing changed")

	assert.Equal(t, []EventKind{EventFailed, EventJoined}, kinds(v.alive("a", "127.0.0.1:7947", metaOf(2, StatusActive, 0), at(20))))
	assert.Equal(t, at(20), since(), "a new incarnation, even in the same status")
	assert.Equal(t, at(20), v.snapshot().Members[0].Since, "snapshots carry it")
}
