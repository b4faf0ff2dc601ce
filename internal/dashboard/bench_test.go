package dashboard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/grains/ratelimit"
	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
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
