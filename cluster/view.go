package cluster

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// view is the deterministic core of Membership: it turns memberlist's
// notifications into the local view and its events, and knows nothing of
// the network. It is not safe for concurrent use; Membership guards it.
type view struct {
	log     *slog.Logger
	version uint64
	members map[string]Member
	// leaving holds, for visible members that announced a graceful leave,
	// the generation that announced it.
	leaving map[string]int64
}

func newView(log *slog.Logger) *view {
	return &view{log: log, members: map[string]Member{}, leaving: map[string]int64{}}
}

// alive applies memberlist's news, at now, that node name is alive with the
// given metadata (NotifyJoin and NotifyUpdate alike) and returns the events
// it caused.
func (v *view) alive(name, gossipAddress string, meta []byte, now time.Time) []Event {
	old, visible := v.members[name]
	m, err := memberFrom(name, gossipAddress, meta, now)
	if err != nil {
		if !visible {
			v.log.Warn("cluster: ignoring a member whose metadata cannot be read", "member", name, "gossip", gossipAddress, "err", err)
			return nil
		}
		v.log.Warn("cluster: a member published metadata that cannot be read; treating it as failed", "member", name, "gossip", gossipAddress, "err", err)
		return v.remove(old, EventFailed, nil)
	}
	switch {
	case !visible:
		return v.add(m, nil)
	case m.Generation < old.Generation:
		v.log.Warn("cluster: ignoring metadata of an older incarnation", "member", name, "generation", m.Generation, "current", old.Generation)
		return nil
	case m.Generation > old.Generation:
		// The silo restarted before its old incarnation was declared dead:
		// that incarnation's activations and directory partition are gone.
		events := v.remove(old, v.departure(old), nil)
		return v.add(m, events)
	}
	if m.Status == old.Status {
		m.Since = old.Since // load and addresses are no change of status
	}
	if m == old {
		return nil
	}
	v.members[name] = m
	return v.emit(nil, EventUpdated, m)
}

// gone applies memberlist's news that node name left or was declared dead.
func (v *view) gone(name string) []Event {
	old, visible := v.members[name]
	if !visible {
		return nil
	}
	return v.remove(old, v.departure(old), nil)
}

// markLeaving records that member id of generation gen announced a graceful
// leave, and reports whether the view shows that incarnation.
func (v *view) markLeaving(id string, gen int64) bool {
	m, ok := v.members[id]
	if !ok || m.Generation != gen {
		return false
	}
	v.leaving[id] = gen
	return true
}

// departure says how a visible member's disappearance counts: a leave only
// when that incarnation announced it first. A silo that merely published
// StatusShuttingDown and then vanished may have crashed before handing its
// directory range over, and reporting it as failed is the safe reading.
func (v *view) departure(m Member) EventKind {
	if gen, ok := v.leaving[m.ID]; ok && gen == m.Generation {
		return EventLeft
	}
	return EventFailed
}

func (v *view) add(m Member, events []Event) []Event {
	v.members[m.ID] = m
	return v.emit(events, EventJoined, m)
}

func (v *view) remove(m Member, kind EventKind, events []Event) []Event {
	delete(v.members, m.ID)
	delete(v.leaving, m.ID)
	return v.emit(events, kind, m)
}

func (v *view) emit(events []Event, kind EventKind, m Member) []Event {
	v.version++
	return append(events, Event{Kind: kind, Member: m, Version: v.version})
}

func (v *view) member(id string) (Member, bool) {
	m, ok := v.members[id]
	return m, ok
}

func (v *view) snapshot() View {
	members := slices.SortedFunc(maps.Values(v.members), func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return View{Version: v.version, Members: members}
}

// memberFrom builds a Member from what memberlist reports about a node at
// now.
func memberFrom(name, gossipAddress string, meta []byte, now time.Time) (Member, error) {
	if err := checkSiloID(name); err != nil {
		return Member{}, err
	}
	nm, err := decodeMeta(meta)
	if err != nil {
		return Member{}, err
	}
	return Member{
		ID:            name,
		Generation:    nm.Generation,
		Address:       nm.Address,
		Gateway:       nm.Gateway,
		Status:        nm.Status,
		Load:          nm.Load,
		GossipAddress: gossipAddress,
		Since:         now,
	}, nil
}
