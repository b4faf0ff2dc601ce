package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/granary-go/granary/actor"
)

// Bounds of /locate's query: a grain type is a protobuf full name, a key
// at most what the rate-limit API takes.
const (
	maxLocateTypeBytes = 512
	maxLocateKeyBytes  = 4096
	locateTimeout      = 5 * time.Second
)

var errLocateQuery = errors.New("want ?type=GRAIN_TYPE&key=KEY")

// locator is what /locate asks: the silo.
type locator interface {
	Locate(ctx context.Context, id actor.GrainID) (silo string, found bool, err error)
}

// locateAnswer is /locate's JSON.
type locateAnswer struct {
	Type  string `json:"type"`
	Key   string `json:"key"`
	Found bool   `json:"found"`
	Silo  string `json:"silo,omitempty"`
}

// parseLocateQuery reads the grain /locate is asked about.
func parseLocateQuery(raw string) (actor.GrainID, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return actor.GrainID{}, fmt.Errorf("%w: %v", errLocateQuery, err)
	}
	if len(q["type"]) != 1 || len(q["key"]) != 1 || len(q) != 2 {
		return actor.GrainID{}, errLocateQuery
	}
	id := actor.GrainID{Type: q.Get("type"), Key: q.Get("key")}
	switch {
	case id.Type == "" || len(id.Type) > maxLocateTypeBytes:
		return actor.GrainID{}, fmt.Errorf("%w: the type must be 1 to %d bytes", errLocateQuery, maxLocateTypeBytes)
	case len(id.Key) > maxLocateKeyBytes:
		return actor.GrainID{}, fmt.Errorf("%w: the key must be at most %d bytes", errLocateQuery, maxLocateKeyBytes)
	}
	return id, nil
}

// handleLocate routes GET /locate on mux: which silo holds a grain's
// activation, from the grain directory. It is on the admin port: a key
// names its caller.
func handleLocate(mux *http.ServeMux, s locator) {
	mux.HandleFunc("GET /locate", func(w http.ResponseWriter, r *http.Request) {
		id, err := parseLocateQuery(r.URL.RawQuery)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), locateTimeout)
		defer cancel()
		silo, found, err := s.Locate(ctx, id)
		if err != nil {
			http.Error(w, "locate: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		body, _ := json.Marshal(locateAnswer{Type: id.Type, Key: id.Key, Found: found, Silo: silo}) // strings and a bool
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}
