package silo

import (
	"slices"
	"strings"
	"time"

	"github.com/granary-go/granary/cluster"
)

// ClusterView is the cluster as one silo sees it, for operators (the
// binary's /cluster) and for the members gauge.
type ClusterView struct {
	// Version is the version of the membership view the silo acts on; 0
	// for a silo that stands alone.
	Version uint64
	// Self is this silo's name.
	Self string
	// Members are sorted by name, this silo included. A silo that stands
	// alone, or that has not joined its cluster yet, lists only itself.
	Members []MemberView
}

// MemberView is one silo of the cluster as this silo sees it.
type MemberView struct {
	// Member is the silo as it announced itself, as gossip last brought it
	// here: its Status is what it published, and Since when this silo's
	// view began to show it in that status.
	cluster.Member
	// State is the status this silo acts on for the member: the one in the
	// view its directory and placement use. It is the member's own Status
	// once this silo has applied the news; for this silo itself it is its
	// own status at once (active when it has joined, shutting-down as soon
	// as its stop begins), before gossip carries it.
	State cluster.Status
}

// Count returns how many members the silo acts on as being in state.
func (v ClusterView) Count(state cluster.Status) int {
	n := 0
	for _, m := range v.Members {
		if m.State == state {
			n++
		}
	}
	return n
}

// ClusterView returns the cluster as this silo sees it. It does no I/O.
func (s *Silo) ClusterView() ClusterView {
	acted := s.membership.View()
	s.mu.Lock()
	self := s.selfLocked()
	s.mu.Unlock()
	out := ClusterView{Version: acted.Version, Self: s.opts.Name}
	if len(acted.Members) == 0 {
		out.Members = []MemberView{{Member: self, State: self.Status}}
		return out
	}
	latest := s.membership.Members().View()
	for _, m := range acted.Members {
		mv := MemberView{Member: m, State: m.Status}
		if fresh, ok := latest.Member(m.ID); ok && fresh.Generation == m.Generation {
			mv.Member = fresh
		}
		out.Members = append(out.Members, mv)
	}
	slices.SortFunc(out.Members, func(a, b MemberView) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// selfLocked is this silo as a member, from its own life cycle: what a
// silo that stands alone, or has yet to join, shows of itself.
func (s *Silo) selfLocked() cluster.Member {
	m := cluster.Member{ID: s.opts.Name, Generation: s.gen, Status: cluster.StatusJoining, Since: s.mu.since}
	switch {
	case s.mu.stopped:
		m.Status = cluster.StatusShuttingDown
	case s.mu.started:
		m.Status = cluster.StatusActive
	}
	if m.Since.IsZero() {
		m.Since = time.Unix(0, s.gen) // created, never started
	}
	if addr := s.gateway.Addr(); addr != nil {
		m.Gateway = addr.String()
	}
	return m
}
