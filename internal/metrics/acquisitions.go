package metrics

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/metric"
)

// Acquisitions are what a silo's limiter grains answered to acquisitions,
// as grains/ratelimit counts them (ratelimit.SiloStats): the bridge
// reports them beside the silo's own instruments. It cannot read them
// itself: the silo knows nothing of rate limiting.
type Acquisitions struct {
	Granted, Rejected, Expired, Cancelled uint64 // how acquisitions ended
	Queued                                uint64 // acquisitions that waited; each also ends as one of the above
	Waiting                               int64  // the calls the limiter grains hold now
}

// acquisitionInstruments are the limiter instruments, read from
// Acquisitions.
var acquisitionInstruments = []acquisitionInstrument{
	{
		Instrument: Instrument{
			Name: "granary.ratelimit.acquisitions", Unit: "{acquisition}", kind: counter,
			Description: "Limiter acquisitions answered, by result: granted, rejected (limit reached, queue full or disabled, evicted), expired (the budget ran out while queued), cancelled (the caller cancelled while queued).",
			Attributes:  []string{string(keyResult)},
		},
		observe: func(a *Acquisitions, emit emit) {
			emit(int64(a.Granted), keyResult.String("granted"))
			emit(int64(a.Rejected), keyResult.String("rejected"))
			emit(int64(a.Expired), keyResult.String("expired"))
			emit(int64(a.Cancelled), keyResult.String("cancelled"))
		},
	},
	{
		Instrument: Instrument{
			Name: "granary.ratelimit.acquisitions.queued", Unit: "{acquisition}", kind: counter,
			Description: "Limiter acquisitions that had to wait (in the queue or behind a configuration change); each is also counted by its result.",
		},
		observe: func(a *Acquisitions, emit emit) { emit(int64(a.Queued)) },
	},
	{
		Instrument: Instrument{
			Name: "granary.ratelimit.queue.depth", Unit: "{call}", kind: upDown,
			Description: "Calls the silo's limiter grains hold now: queued acquisitions, and configuration changes, resets and deletes waiting their turn.",
		},
		observe: func(a *Acquisitions, emit emit) { emit(a.Waiting) },
	},
}

type acquisitionInstrument struct {
	Instrument
	observe func(a *Acquisitions, emit emit)
}

// Limiters is one silo's registration of limiter instruments.
type Limiters struct {
	reg  metric.Registration
	once sync.Once
}

// RegisterAcquisitions registers the limiter instruments of a silo with
// mp; read is called once per collection.
func RegisterAcquisitions(mp metric.MeterProvider, silo string, read func() Acquisitions) (*Limiters, error) {
	meter := mp.Meter(ScopeName)
	siloAttr := keySilo.String(silo)
	instruments := make([]metric.Int64Observable, len(acquisitionInstruments))
	observables := make([]metric.Observable, len(acquisitionInstruments))
	for i, in := range acquisitionInstruments {
		inst, err := newObservable(meter, in.Instrument)
		if err != nil {
			return nil, err
		}
		instruments[i], observables[i] = inst, inst
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		a := read()
		for i, in := range acquisitionInstruments {
			in.observe(&a, observeWith(o, instruments[i], siloAttr))
		}
		return nil
	}, observables...)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &Limiters{reg: reg}, nil
}

// Close unregisters the limiter instruments' callback. Safe to call twice.
func (l *Limiters) Close() error {
	var err error
	l.once.Do(func() { err = l.reg.Unregister() })
	if err != nil {
		return fmt.Errorf("metrics: unregister: %w", err)
	}
	return nil
}
