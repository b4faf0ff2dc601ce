package grainrt

import "testing"

// stopper is a runtime for the tests: a Timer that counts its stops.
type stopper struct{ stops int }

func (s *stopper) Stop() { s.stops++ }

// handle is a handle as actor declares one: a Handle embedded under an
// unexported alias.
type (
	timerHandle = Handle[Timer]
	handle      struct{ timerHandle }
)

// A handle calls what it was bound to, and holds nothing before.
func TestBindSetsWhatTheHandleCalls(t *testing.T) {
	h := new(handle)
	if rt := RuntimeOf[Timer](h); rt != nil {
		t.Fatalf("an unbound handle holds %v", rt)
	}
	s := &stopper{}
	Bind[Timer](h, s)
	Runtime(&h.timerHandle).Stop()
	RuntimeOf[Timer](h).Stop()
	if s.stops != 2 {
		t.Fatalf("the bound runtime was called %d times, want 2", s.stops)
	}
	other := new(handle)
	if RuntimeOf[Timer](other) != nil {
		t.Fatal("binding one handle bound another")
	}
}
