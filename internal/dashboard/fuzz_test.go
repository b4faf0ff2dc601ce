package dashboard

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"google.golang.org/protobuf/proto"

	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/internal/host"
	px "github.com/granary-go/granary/proxy"
)

// The dashboard's only input from a browser is the request: its path and
// method. None may panic it or answer more than the routes it has.
func FuzzDashboardRequests(f *testing.F) {
	_, d, _ := startSilo(f, Options{})
	mux := http.NewServeMux()
	d.Register(mux, false)
	for _, seed := range []string{Path, SnapshotPath, Path + "app.js", Path + "../go.mod", "/dashboard", Path + "%2e%2e/x", Path + "assets/app.js"} {
		f.Add("GET", seed)
	}
	f.Add("POST", SnapshotPath)
	f.Fuzz(func(t *testing.T, method, path string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || (method != "GET" && method != "POST" && method != "HEAD") {
			return
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "/", nil)
		req.URL = u
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusMovedPermanently, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusBadRequest, http.StatusTemporaryRedirect:
		default:
			t.Fatalf("%s %s: %d", method, path, rec.Code)
		}
	})
}

// seedAnswer is a well-formed part of every kind of entry.
func seedAnswer() *dpb.SnapshotReply {
	return &dpb.SnapshotReply{
		Silo: "b", Generation: 7, BuiltUnixNano: 1,
		Activations: []*dpb.TypeCount{{Type: "granary.ratelimit.FixedWindowLimiter", Count: 2}},
		Calls: []*dpb.MethodCalls{{Type: "granary.ratelimit.FixedWindowLimiter", Method: "Acquire", Timed: 3, SecondsSum: 0.01,
			Bounds: []float64{0.001, 0.01}, Cumulative: []uint64{1, 3}, Outcomes: []*dpb.Outcome{{Outcome: "ok", Count: 3}}}},
		Limiters: &dpb.LimiterTotals{Granted: 3, Rejected: 1, Waiting: 1},
		Keys: &dpb.KeyTable{Active: 2, Asked: 2, Hottest: []*dpb.Key{
			{Algorithm: "fixed-window", Key: "alice", Limit: 5, Available: 0, Succeeded: 5, Refused: 2},
			{Algorithm: "token-bucket", Key: "search", Error: "timed out"}}},
	}
}

// Another silo's answer is input from the network: decoding and checking
// it may refuse it but never panic, and what it lets through makes a
// snapshot that encodes, within the bounds.
func FuzzPeerAnswers(f *testing.F) {
	good, err := px.AppendMessage(nil, seedAnswer())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, true)
	f.Add(good, false)
	nan := seedAnswer()
	nan.Calls[0].SecondsSum = math.NaN()
	for _, m := range []proto.Message{nan, &dpb.SnapshotReply{Silo: "b"}} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, true) // a length past the end
	f.Add([]byte{0x0a, 0x01, 0xff}, true)                   // a silo name that is not UTF-8
	f.Fuzz(func(t *testing.T, b []byte, keys bool) {
		p, err := decodeAnswer(b, keys, DefaultHottest)
		if err != nil {
			return
		}
		if !keys && p.Keys != nil {
			t.Fatal("keys let through unasked")
		}
		d := &Dashboard{opts: Options{Hottest: DefaultHottest}}
		snap := Snapshot{Silos: []SiloPart{}, Activations: mergeActivations([]*dpb.SnapshotReply{p}), Calls: mergeCalls([]*dpb.SnapshotReply{p})}
		if keys {
			snap.Keys = d.mergeKeys([]*dpb.SnapshotReply{p})
			if len(snap.Keys.Hottest) > DefaultHottest {
				t.Fatalf("%d keys", len(snap.Keys.Hottest))
			}
		}
		if _, err := json.Marshal(snap); err != nil {
			t.Fatalf("a snapshot of an accepted answer does not encode: %v", err)
		}
	})
}

// recorder is a Replier that keeps the one answer.
type recorder struct {
	replies int
	reply   proto.Message
	err     error
	done    chan struct{}
}

func (r *recorder) Reply(_ *host.Request, reply proto.Message, err error) {
	r.replies++
	r.reply, r.err = reply, err
	close(r.done)
}

// Another silo's request is input from the network too: whatever its
// method and payload, it is answered exactly once, with a part or an
// error.
func FuzzStatsRequests(f *testing.F) {
	_, d, _ := startSilo(f, Options{})
	good, err := proto.Marshal(&dpb.SnapshotRequest{Keys: true, Hottest: 3})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dpb.Stats_Snapshot_Method.ID, good)
	f.Add(dpb.Stats_Snapshot_Method.ID, []byte{})
	f.Add(dpb.Stats_Snapshot_Method.ID, []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(uint32(1), good)
	f.Fuzz(func(t *testing.T, method uint32, payload []byte) {
		rec := &recorder{done: make(chan struct{})}
		d.serve(&host.Request{Target: actorID(), MethodID: method, Payload: payload, Reply: rec, FromSilo: true})
		<-rec.done
		if rec.replies != 1 || (rec.err == nil) == (rec.reply == nil) {
			t.Fatalf("%d replies, %v, %v", rec.replies, rec.reply, rec.err)
		}
		if p, ok := rec.reply.(*dpb.SnapshotReply); ok && p.Keys != nil {
			var in dpb.SnapshotRequest
			if proto.Unmarshal(payload, &in) != nil || !in.Keys || in.Hottest > 0 && len(p.Keys.Hottest) > int(in.Hottest) {
				t.Fatalf("keys in the answer to %x", payload)
			}
		}
	})
}
