package dashboard

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/grains/ratelimit"
	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// BenchmarkDashboardRefresh is what one refresh costs the silo: one
// snapshot built and encoded, for a silo with 100 active limiters. The
// public page reads the view, the activations and the instruments; the
// admin page also asks every limiter for its statistics and
// configuration. "scrape" is one gathering of the instruments alone.
// "answer" is what a silo does for another's page: its part built and
// encoded for the wire; "gather-3" is a page of a cluster of three whose
// two other parts arrive encoded (as from the links) and are decoded,
// checked and merged.
func BenchmarkDashboardRefresh(b *testing.B) {
	s, d, reg := startSilo(b, Options{})
	for i := range 100 {
		acquire(b, ratelimit.FixedWindow(s.Caller(), fmt.Sprintf("user:%d", i)), 1)
	}
	now := time.Now()
	d.now = func() time.Time { now = now.Add(time.Hour); return now } // every call builds anew
	// The yardstick: one gathering of the silo's instruments, which every
	// Prometheus scrape of /metrics does too.
	b.Run("scrape", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, keys := range []bool{false, true} {
		name := "public"
		if keys {
			name = "admin-100-keys"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.encoded(context.Background(), keys); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("answer-"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := d.part(context.Background(), keys)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := proxy.AppendMessage(nil, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A cluster of three: two peers whose parts are this silo's, renamed,
	// as big as a silo's with 100 limiters, arriving encoded.
	p, err := d.part(context.Background(), true)
	if err != nil {
		b.Fatal(err)
	}
	view := d.view()
	encoded := map[string][]byte{}
	for _, peer := range []string{"peer-1", "peer-2"} {
		e, err := proxy.AppendMessage(nil, &dpb.SnapshotReply{Silo: peer, Activations: p.Activations, Calls: p.Calls, Limiters: p.Limiters,
			Keys: &dpb.KeyTable{Active: p.Keys.Active, Asked: p.Keys.Asked, Hottest: p.Keys.Hottest}})
		if err != nil {
			b.Fatal(err)
		}
		encoded[peer] = e
		view.Members = append(view.Members, silo.MemberView{Member: cluster.Member{ID: peer}})
	}
	d.view = func() silo.ClusterView { return view }
	d.ask = func(_ context.Context, peer string, keys bool) (*dpb.SnapshotReply, error) {
		return decodeAnswer(encoded[peer], keys, d.opts.Hottest)
	}
	for _, keys := range []bool{false, true} {
		name := "gather-3-public"
		if keys {
			name = "gather-3-admin-100-keys"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.encoded(context.Background(), keys); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDashboardClusterGather is a page of a real cluster of three
// silos, in process, over their links: silo 0 builds its own part anew
// each time and asks the two others for theirs, which they share for up
// to MinInterval, as they would with many pages open. 30 limiters over
// the three silos.
func BenchmarkDashboardClusterGather(b *testing.B) {
	var mu sync.Mutex
	dashboards := map[string]*Dashboard{}
	b.Cleanup(func() {
		for _, d := range dashboards {
			d.Close()
		}
	})
	c := testcluster.New(b, testcluster.Options{Silos: 3, Register: func(s *silo.Silo) error {
		if err := ratelimit.Register(s, ratelimit.Defaults{}); err != nil {
			return err
		}
		d, err := New(s, nil, Options{})
		if err != nil {
			return err
		}
		mu.Lock()
		dashboards[s.Name()] = d
		mu.Unlock()
		return nil
	}})
	for i := range 30 {
		acquire(b, ratelimit.FixedWindow(c.Silo(0).Caller(), fmt.Sprintf("user:%d", i)), 1)
	}
	d := dashboards[testcluster.Name(0)]
	now := time.Now()
	d.now = func() time.Time { now = now.Add(time.Hour); return now } // silo 0's own part and page anew
	for _, keys := range []bool{false, true} {
		name := "public"
		if keys {
			name = "admin"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				snap := d.Snapshot(context.Background(), keys)
				for _, p := range snap.Silos {
					if !p.Answered {
						b.Fatalf("%s did not answer: %s", p.Name, p.Error)
					}
				}
			}
		})
	}
}
