package metrics

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/granary-go/granary/internal/silohooks"
)

// Acquisitions are what a silo's limiter grains answered to
// acquisitions; grains/ratelimit hands them to the silo through its hooks.
type Acquisitions = silohooks.Acquisitions

// acquisitionInstruments are the limiter instruments, read from
// Acquisitions.
var acquisitionInstruments = []instrument[Acquisitions]{
	{
		Name: "granary.ratelimit.acquisitions", Unit: "{acquisition}", kind: counter,
		Description: "Limiter acquisitions answered, by result: granted, rejected (limit reached, queue full or disabled, evicted), expired (the budget ran out while queued), cancelled (the caller cancelled while queued).",
		Attributes:  []string{string(keyResult)},
		observe: func(a *Acquisitions, emit emit) {
			emit(int64(a.Granted), keyResult.String("granted"))
			emit(int64(a.Rejected), keyResult.String("rejected"))
			emit(int64(a.Expired), keyResult.String("expired"))
			emit(int64(a.Cancelled), keyResult.String("cancelled"))
		},
	},
	{
		Name: "granary.ratelimit.acquisitions.queued", Unit: "{acquisition}", kind: counter,
		Description: "Limiter acquisitions that had to wait (in the queue or behind a configuration change); each is also counted by its result.",
		observe:     func(a *Acquisitions, emit emit) { emit(int64(a.Queued)) },
	},
	{
		Name: "granary.ratelimit.queue.depth", Unit: "{call}", kind: upDown,
		Description: "Calls the silo's limiter grains hold now: queued acquisitions, and configuration changes, resets and deletes waiting their turn.",
		observe:     func(a *Acquisitions, emit emit) { emit(a.Waiting) },
	},
}

// Limiters is one silo's registration of limiter instruments; Close
// unregisters them.
type Limiters struct{ *registration }

// RegisterAcquisitions registers the limiter instruments of a silo with
// mp; read is called once per collection.
func RegisterAcquisitions(mp metric.MeterProvider, silo string, read func() Acquisitions) (*Limiters, error) {
	reg, err := registerObserved(mp.Meter(ScopeName), keySilo.String(silo), acquisitionInstruments, read)
	if err != nil {
		return nil, err
	}
	return &Limiters{reg}, nil
}
