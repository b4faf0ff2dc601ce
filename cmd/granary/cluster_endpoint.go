package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/granary-go/granary/cluster"
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

// clusterMember is one silo of the cluster as this silo sees it.
type clusterMember struct {
	Name           string `json:"name"`
	SiloAddress    string `json:"silo_address,omitempty"`
	GatewayAddress string `json:"gateway_address,omitempty"`
	GossipAddress  string `json:"gossip_address,omitempty"`
	// Generation is a decimal string: Unix nanoseconds are more than a
	// JSON number holds exactly in JavaScript.
	Generation string `json:"generation"`
	Status     string `json:"status"`
	State      string `json:"state"`
	Since      string `json:"since"`
	Load       int64  `json:"load"`
}

// newClusterAnswer turns the silo's view into /cluster's answer.
func newClusterAnswer(v silo.ClusterView) clusterAnswer {
	out := clusterAnswer{Self: v.Self, Version: v.Version, Members: make([]clusterMember, 0, len(v.Members))}
	for _, m := range v.Members {
		out.Members = append(out.Members, clusterMember{
			Name: m.ID, SiloAddress: m.Address, GatewayAddress: m.Gateway, GossipAddress: m.GossipAddress,
			Generation: strconv.FormatInt(m.Generation, 10),
			Status:     m.Status.String(), State: m.State.String(),
			Since: m.Since.UTC().Format(time.RFC3339Nano), Load: m.Load,
		})
	}
	return out
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
