package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/dashboard"
	"github.com/granary-go/granary/silo"
)

// clusterView is what /cluster reads: the silo's view of its cluster.
type clusterView interface{ ClusterView() silo.ClusterView }

// clusterAnswer is /cluster's JSON (docs/operations.md shows it). Fields
// about this silo itself (its readiness, a fence) belong beside Self, and
// readers ignore fields they do not know.
type clusterAnswer struct {
	// Self is this silo's name.
	Self string `json:"self"`
	// Version is the version of the membership view; 0 for a silo alone.
	Version uint64 `json:"version"`
	// Members are sorted by name, this silo included.
	Members []clusterMember `json:"members"`
}

// clusterMember is one silo of the cluster as this silo sees it; the
// dashboard shows the same.
type clusterMember = dashboard.Member

// newClusterAnswer turns the silo's view into /cluster's answer.
func newClusterAnswer(v silo.ClusterView) clusterAnswer {
	return clusterAnswer{Self: v.Self, Version: v.Version, Members: dashboard.MembersOf(v)}
}

// handleCluster routes GET /cluster on mux: the silo's view of its
// cluster, read-only. Other methods get 405 from the mux.
func handleCluster(mux *http.ServeMux, s clusterView) {
	mux.HandleFunc("GET /cluster", func(w http.ResponseWriter, _ *http.Request) {
		body, err := json.MarshalIndent(newClusterAnswer(s.ClusterView()), "", "  ")
		if err != nil { // strings and numbers only: cannot happen
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}

// expectedSilos is -expect-silos: the fewest active silos this silo must
// see to be ready. Zero asks for none.
type expectedSilos struct {
	n    int
	view clusterView
}

// tooFewSilos is /readyz's reason while the silo sees fewer active silos
// than -expect-silos.
type tooFewSilos struct{ active, expected int }

func (e tooFewSilos) Error() string {
	return fmt.Sprintf("sees %d of %d expected silos", e.active, e.expected)
}

// check returns tooFewSilos while the view has fewer active members than
// expected.
func (e expectedSilos) check() error {
	if e.n <= 0 || e.view == nil {
		return nil
	}
	if active := e.view.ClusterView().Count(cluster.StatusActive); active < e.n {
		return tooFewSilos{active: active, expected: e.n}
	}
	return nil
}
