package host

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/clock"
)

// Outcome is how a grain call ended, as the call counters count it.
type Outcome uint8

// Outcomes of a call.
const (
	// OutcomeOK is a call answered without an error (a rejected lease is
	// a value, so it counts here).
	OutcomeOK Outcome = iota
	// OutcomeError is a call answered with an error other than the two
	// below.
	OutcomeError
	// OutcomeCancelled is a call whose caller cancelled: dropped from the
	// mailbox before it ran, or answered with context.Canceled.
	OutcomeCancelled
	// OutcomePanic is a call whose method panicked.
	OutcomePanic

	// NumOutcomes is the number of outcomes, the length of
	// MethodCalls.Calls.
	NumOutcomes = int(OutcomePanic) + 1
)

var outcomeNames = [NumOutcomes]string{"ok", "error", "cancelled", "panic"}

// String returns "ok", "error", "cancelled" or "panic".
func (o Outcome) String() string {
	if int(o) < NumOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// outcomeOf classifies a call's result. Only failures pay for more than
// a comparison.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case isPanic(err):
		return OutcomePanic
	case errors.Is(err, context.Canceled):
		return OutcomeCancelled
	}
	return OutcomeError
}

// CallObserver is told the outcome and duration of every call of one
// method: from the start of the method's turn to its reply, which for a
// deferred reply is when the grain answers. It runs on the goroutine that
// answers, so it must be quick and safe for concurrent use.
type CallObserver func(outcome Outcome, d time.Duration)

// WithCallObserver makes the host time calls: observer is asked once per
// method of every kind, when the host is made, for the function told of
// that method's calls (nil observes nothing). Without it the host reads
// no clock for calls and only counts them.
func WithCallObserver(observer func(grainType, method string) CallObserver) HostOption {
	return func(h *Host) { h.observer = observer }
}

// MethodCalls counts the calls of one method of a grain type that ran on
// the host, by outcome.
type MethodCalls struct {
	// Type is the grain type.
	Type string
	// Method is the method's name, or "" for the calls whose method id the
	// type's contract does not list (or when its dispatcher lists none).
	Method string
	// Calls counts the calls answered, indexed by Outcome. A deferred
	// reply counts when the grain answers it.
	Calls [NumOutcomes]uint64
}

// Calls returns the call counters of every method of every kind, in the
// order the kinds were given and their contracts list the methods.
func (h *Host) Calls() []MethodCalls {
	var n int
	for _, k := range h.calls {
		n += len(k.methods)
	}
	out := make([]MethodCalls, 0, n)
	for _, k := range h.calls {
		for i := range k.methods {
			m := &k.methods[i]
			mc := MethodCalls{Type: k.grainType, Method: m.name}
			for o := range mc.Calls {
				mc.Calls[o] = m.counts[o].Load()
			}
			out = append(out, mc)
		}
	}
	return out
}

// methodLister is a Dispatcher that knows its contract's methods, as the
// generated service descriptors' dispatcher does.
type methodLister interface {
	MethodIDs() []uint32
	MethodName(id uint32) string
}

// kindCalls holds the call counters of one grain type, one per method of
// its contract and a last one for method ids outside it. They are made
// when the host is, so that a call finds its counter without a map and
// without allocating.
type kindCalls struct {
	grainType string
	ids       []uint32 // the contract's method ids; sorted when above linearMethods
	methods   []methodCalls
}

// methodCalls counts one method's calls.
type methodCalls struct {
	name    string
	counts  [NumOutcomes]atomic.Uint64
	observe CallObserver // nil unless the host times calls
}

// linearMethods is the contract size up to which a call's counter is
// found by scanning instead of by binary search.
const linearMethods = 8

func newKindCalls(k *Kind, observer func(grainType, method string) CallObserver) *kindCalls {
	kc := &kindCalls{grainType: k.Type}
	var names func(uint32) string
	if l, ok := k.Dispatcher.(methodLister); ok {
		kc.ids = slices.Clone(l.MethodIDs())
		names = l.MethodName
	}
	if len(kc.ids) > linearMethods {
		slices.Sort(kc.ids)
	}
	kc.methods = make([]methodCalls, len(kc.ids)+1)
	for i, id := range kc.ids {
		kc.methods[i].name = names(id)
	}
	if observer != nil {
		for i := range kc.methods {
			kc.methods[i].observe = observer(k.Type, kc.methods[i].name)
		}
	}
	return kc
}

// method returns the counter of the method with the given id.
func (k *kindCalls) method(id uint32) *methodCalls {
	if len(k.ids) <= linearMethods {
		for i, m := range k.ids {
			if m == id {
				return &k.methods[i]
			}
		}
	} else if i, ok := slices.BinarySearch(k.ids, id); ok {
		return &k.methods[i]
	}
	return &k.methods[len(k.ids)]
}

// start returns when a call began, read only when the host times calls.
func (m *methodCalls) start(c clock.Clock) time.Time {
	if m.observe == nil {
		return time.Time{}
	}
	return c.Now()
}

// done counts a call that ended with outcome, begun at start. It is small
// enough to inline: the call path pays the add and a nil check.
func (m *methodCalls) done(outcome Outcome, start time.Time, c clock.Clock) {
	m.counts[outcome].Add(1)
	if m.observe != nil {
		m.timed(outcome, start, c)
	}
}

func (m *methodCalls) timed(outcome Outcome, start time.Time, c clock.Clock) {
	m.observe(outcome, c.Now().Sub(start))
}
