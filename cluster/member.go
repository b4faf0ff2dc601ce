package cluster

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is the stage of its life a silo announces to the others.
type Status uint8

// The statuses a silo publishes. The zero Status is not valid.
const (
	// StatusJoining: the silo is in the membership but not ready to host
	// activations (Start publishes it).
	StatusJoining Status = 1
	// StatusActive: the silo hosts activations and takes new ones.
	StatusActive Status = 2
	// StatusShuttingDown: the silo is leaving; place nothing new on it.
	StatusShuttingDown Status = 3
)

// String returns the status in lower case.
func (s Status) String() string {
	switch s {
	case StatusJoining:
		return "joining"
	case StatusActive:
		return "active"
	case StatusShuttingDown:
		return "shutting-down"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

func (s Status) valid() bool { return s >= StatusJoining && s <= StatusShuttingDown }

// Member is one silo as a membership view sees it.
type Member struct {
	// ID is the silo's id, unique in the cluster (memberlist's node name).
	ID string
	// Generation tells incarnations of the same ID apart: the silo's start
	// time in Unix nanoseconds. A silo that restarts under the same ID has a
	// higher generation.
	Generation int64
	// Address is the silo's silo-to-silo transport address, host:port.
	Address string
	// Gateway is the address clients connect to, or "" when the silo is not
	// a gateway.
	Gateway string
	// Status is what the silo last announced.
	Status Status
	// Load is the silo's last published load figure (its activation count),
	// for placement. Publication is rate-limited, so it lags.
	Load int64
	// GossipAddress is where the silo's memberlist listens, host:port.
	GossipAddress string
	// Since is when this silo's view began to show the member as it is:
	// when it joined (or this incarnation replaced the last), or when it
	// announced its Status, by the membership's clock. Load and address
	// updates leave it as it was, so that it says how long the member has
	// been in its status. Zero in Membership.Local.
	Since time.Time
}

// EventKind says what happened to a member.
type EventKind uint8

// The kinds of membership events.
const (
	// EventJoined: a member became visible: new, a new incarnation, or one
	// that was reported failed by mistake (it refuted a false suspicion, or
	// a partition healed) and comes back with the same generation, its
	// activations possibly still running.
	EventJoined EventKind = iota + 1
	// EventUpdated: a visible member published new metadata (status, load
	// or addresses) under the same generation.
	EventUpdated
	// EventLeft: a member announced its departure to this silo and then
	// left (Membership.Stop).
	EventLeft
	// EventFailed: a member disappeared without announcing it: it crashed,
	// was killed, was declared dead by the failure detector, was replaced
	// by a newer incarnation, or published metadata this silo cannot read.
	EventFailed
)

// String returns the kind in lower case.
func (k EventKind) String() string {
	switch k {
	case EventJoined:
		return "joined"
	case EventUpdated:
		return "updated"
	case EventLeft:
		return "left"
	case EventFailed:
		return "failed"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one change of the local membership view.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Member is the member after the change; for EventLeft and EventFailed,
	// as it was last seen.
	Member Member
	// Version is the view version this event produced: one more than the
	// version before it. A subscriber sees versions in increasing order,
	// with gaps only where a queued update was superseded by a newer one
	// (see Subscription).
	Version uint64
}

// View is a snapshot of the local membership view: every visible member,
// this silo included, in every status. After Stop or Kill the view keeps
// its last state.
type View struct {
	// Version counts the events applied to the view; 0 before Start.
	Version uint64
	// Members are sorted by ID.
	Members []Member
}

// Member returns the member with the given ID.
func (v View) Member(id string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, id, func(m Member, id string) int { return strings.Compare(m.ID, id) })
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}
