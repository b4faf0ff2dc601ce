package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/persistence"
)

// ScopeName is the instrumentation scope of every instrument.
const ScopeName = "github.com/granary-go/granary"

// Stats is what the bridge reads of a silo at each collection: counters
// the runtime keeps anyway. Counters must never go back; the silo adds the
// final counts of closed connections to Gateway and Links for that.
type Stats struct {
	Host      host.HostStats           // the activations
	Calls     []host.MethodCalls       // calls by grain type, method and outcome
	Gateway   rpc.EndpointStats        // client connections, open and closed
	Clients   int                      // client connections open
	Links     rpc.EndpointStats        // connections to other silos, open and closed
	Directory directory.Stats          // this silo's part of the directory and its cache
	Flusher   persistence.FlusherStats // the state writes
	Members   MemberCounts             // the cluster as this silo acts on it
	Fenced    bool                     // the minority fence is up
	Refused   int64                    // grain calls refused while the fence was up
}

// MemberCounts are the silos of the cluster, this one included, by the
// state this silo acts on for each (silo.MemberView.State).
type MemberCounts struct {
	Joining, Active, ShuttingDown int
}

// Attribute keys.
const (
	keySilo       = attribute.Key("silo")
	keyGrainType  = attribute.Key("grain.type")
	keyMethod     = attribute.Key("grain.method")
	keyOutcome    = attribute.Key("outcome")
	keyConnection = attribute.Key("connection") // gateway or link
	keyDirection  = attribute.Key("direction")  // in or out
	keyReason     = attribute.Key("reason")
	keyResult     = attribute.Key("result")
	keyState      = attribute.Key("state")
)

// unknownMethod names the method of calls whose id the contract does not
// list.
const unknownMethod = "unknown"

type kind uint8

const (
	counter kind = iota // a monotonic sum
	upDown              // a sum that goes both ways: a count of things alive
)

// emit observes one value of an instrument, with attributes besides the
// silo's.
type emit func(value int64, attrs ...attribute.KeyValue)

// An Instrument describes one metric the bridge reports.
type Instrument struct {
	// Name is the OpenTelemetry name; Prometheus shows it with dots as
	// underscores, counters ending in _total and units as a suffix.
	Name string
	// Unit is the UCUM unit.
	Unit string
	// Description says what it counts.
	Description string
	// Attributes lists the attribute keys besides silo.
	Attributes []string
}

// instrument is an asynchronous instrument read from an S at each
// collection.
type instrument[S any] struct {
	Name, Unit, Description string
	Attributes              []string
	kind                    kind
	observe                 func(src *S, emit emit)
}

func (in instrument[S]) describe() Instrument {
	return Instrument{Name: in.Name, Unit: in.Unit, Description: in.Description, Attributes: in.Attributes}
}

// Instruments lists every instrument the bridge reports: the silo's, the
// call duration histogram, the limiters'.
func Instruments() []Instrument {
	var out []Instrument
	for _, in := range observed {
		out = append(out, in.describe())
	}
	out = append(out, callDuration)
	for _, in := range acquisitionInstruments {
		out = append(out, in.describe())
	}
	return out
}

// CallDurationName is the name of the call duration histogram.
const CallDurationName = "granary.grain.call.duration"

var callDuration = Instrument{
	Name: CallDurationName, Unit: "s",
	Description: "Time from the start of a grain method's turn to its reply (a deferred reply: until the grain answers); recorded only with a meter provider.",
	Attributes:  []string{string(keyGrainType), string(keyMethod), string(keyOutcome)},
}

// callDurationBuckets are the histogram's bounds, in seconds: from a
// method that answers at once to a queued acquisition that waits.
var callDurationBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// observed are the instruments read from Stats at each collection.
var observed = []instrument[Stats]{
	{
		Name: "granary.grain.calls", Unit: "{call}", kind: counter,
		Description: "Grain calls answered on this silo, by grain type, method and outcome (ok, error, cancelled, panic).",
		Attributes:  []string{string(keyGrainType), string(keyMethod), string(keyOutcome)},
		observe: func(st *Stats, emit emit) {
			for _, mc := range st.Calls {
				method := mc.Method
				if method == "" {
					method = unknownMethod
				}
				for o, n := range mc.Calls {
					emit(int64(n), keyGrainType.String(mc.Type), keyMethod.String(method), keyOutcome.String(host.Outcome(o).String()))
				}
			}
		},
	},
	{
		Name: "granary.activations", Unit: "{activation}", kind: upDown,
		Description: "Grain activations alive on this silo.",
		observe:     func(st *Stats, emit emit) { emit(int64(st.Host.Active)) },
	},
	{
		Name: "granary.activations.created", Unit: "{activation}", kind: counter,
		Description: "Grain activations created.",
		observe:     func(st *Stats, emit emit) { emit(st.Host.Activations) },
	},
	{
		Name: "granary.activations.deactivated", Unit: "{activation}", kind: counter,
		Description: "Grain activations deactivated (idle, asked for, or the silo stopping).",
		observe:     func(st *Stats, emit emit) { emit(st.Host.Deactivations) },
	},
	{
		Name: "granary.activations.failed", Unit: "{activation}", kind: counter,
		Description: "Activations whose state load or OnActivate failed.",
		observe:     func(st *Stats, emit emit) { emit(st.Host.ActivationFailures) },
	},
	{
		Name: "granary.activations.refused", Unit: "{activation}", kind: counter,
		Description: "New activations refused: the silo's bound, or a client connection's activation budget.",
		observe:     func(st *Stats, emit emit) { emit(st.Host.RefusedActivations) },
	},
	{
		Name: "granary.directory.lookups", Unit: "{lookup}", kind: counter,
		Description: "Grain locations asked of the grain directory.",
		observe:     func(st *Stats, emit emit) { emit(st.Directory.Lookups) },
	},
	{
		Name: "granary.directory.cache_hits", Unit: "{lookup}", kind: counter,
		Description: "Directory lookups answered by this silo's cache.",
		observe:     func(st *Stats, emit emit) { emit(st.Directory.CacheHits) },
	},
	{
		Name: "granary.directory.remote_lookups", Unit: "{lookup}", kind: counter,
		Description: "Directory lookups asked of the silo that owns the grain's part of the directory.",
		observe:     func(st *Stats, emit emit) { emit(st.Directory.RemoteLookups) },
	},
	{
		Name: "granary.directory.entries", Unit: "{entry}", kind: upDown,
		Description: "Directory entries in this silo's part of the grain directory.",
		observe:     func(st *Stats, emit emit) { emit(int64(st.Directory.Partition)) },
	},
	{
		Name: "granary.transport.frames", Unit: "{frame}", kind: counter,
		Description: "Frames read (in) and written (out), on client connections (gateway) and links to other silos (link).",
		Attributes:  []string{string(keyConnection), string(keyDirection)},
		observe: func(st *Stats, emit emit) {
			byConnection(st, func(t rpc.EndpointStats, conn attribute.KeyValue) {
				emit(int64(t.Transport.FramesRead), conn, keyDirection.String("in"))
				emit(int64(t.Transport.FramesWritten), conn, keyDirection.String("out"))
			})
		},
	},
	{
		Name: "granary.transport.bytes", Unit: "By", kind: counter,
		Description: "Bytes read (in, frame bodies) and written (out, length prefixes and heartbeats included), by connection kind.",
		Attributes:  []string{string(keyConnection), string(keyDirection)},
		observe: func(st *Stats, emit emit) {
			byConnection(st, func(t rpc.EndpointStats, conn attribute.KeyValue) {
				emit(int64(t.Transport.BytesRead), conn, keyDirection.String("in"))
				emit(int64(t.Transport.BytesWritten), conn, keyDirection.String("out"))
			})
		},
	},
	{
		Name: "granary.transport.rejections", Unit: "{request}", kind: counter,
		Description: "Incoming requests refused at once: overloaded (too many in flight, or over the client's share), activation_budget (the connection's budget of new activations), activation_share (its client's share of new activations under way), bad_request (unreadable), permission_denied (a right the method needs is missing).",
		Attributes:  []string{string(keyConnection), string(keyReason)},
		observe: func(st *Stats, emit emit) {
			byConnection(st, func(t rpc.EndpointStats, conn attribute.KeyValue) {
				emit(t.Overloaded, conn, keyReason.String("overloaded"))
				emit(t.OverBudget, conn, keyReason.String("activation_budget"))
				emit(t.OverShare, conn, keyReason.String("activation_share"))
				emit(t.BadRequests, conn, keyReason.String("bad_request"))
				emit(t.Denied, conn, keyReason.String("permission_denied"))
			})
		},
	},
	{
		Name: "granary.transport.timeouts", Unit: "{call}", kind: counter,
		Description: "Calls this silo sent that failed by their response timeout, by connection kind.",
		Attributes:  []string{string(keyConnection)},
		observe: func(st *Stats, emit emit) {
			byConnection(st, func(t rpc.EndpointStats, conn attribute.KeyValue) { emit(t.Timeouts, conn) })
		},
	},
	{
		Name: "granary.cluster.members", Unit: "{silo}", kind: upDown,
		Description: "Silos of the cluster as this silo sees it, itself included, by state (joining, active, shutting-down); a silo alone counts itself.",
		Attributes:  []string{string(keyState)},
		observe: func(st *Stats, emit emit) {
			emit(int64(st.Members.Joining), keyState.String("joining"))
			emit(int64(st.Members.Active), keyState.String("active"))
			emit(int64(st.Members.ShuttingDown), keyState.String("shutting-down"))
		},
	},
	{
		Name: "granary.fenced", Unit: "{fence}", kind: upDown,
		Description: "1 while the minority fence is up: this silo cannot reach a majority of its cluster and refuses grain calls; else 0.",
		observe: func(st *Stats, emit emit) {
			var up int64
			if st.Fenced {
				up = 1
			}
			emit(up)
		},
	},
	{
		Name: "granary.fence.refused", Unit: "{call}", kind: counter,
		Description: "Grain calls this silo refused (unavailable) while the minority fence was up.",
		observe:     func(st *Stats, emit emit) { emit(st.Refused) },
	},
	{
		Name: "granary.gateway.connections", Unit: "{connection}", kind: upDown,
		Description: "Client connections open on the gateway.",
		observe:     func(st *Stats, emit emit) { emit(int64(st.Clients)) },
	},
	{
		Name: "granary.storage.writes", Unit: "{write}", kind: counter,
		Description: "Grain state writes to the store, by result (ok, failed); failed writes stay dirty and are retried.",
		Attributes:  []string{string(keyResult)},
		observe: func(st *Stats, emit emit) {
			emit(int64(st.Flusher.WritesSucceeded), keyResult.String("ok"))
			emit(int64(st.Flusher.WritesFailed), keyResult.String("failed"))
		},
	},
}

func byConnection(st *Stats, fn func(rpc.EndpointStats, attribute.KeyValue)) {
	fn(st.Gateway, keyConnection.String("gateway"))
	fn(st.Links, keyConnection.String("link"))
}

// Silo is one silo's registration with a meter provider.
type Silo struct {
	*registration
	silo     attribute.KeyValue
	duration metric.Float64Histogram
}

// Register registers a silo's instruments with mp. read is called once per
// collection, on the collector's goroutine; it must be safe for concurrent
// use. It does no I/O.
func Register(mp metric.MeterProvider, silo string, read func() Stats) (*Silo, error) {
	meter := mp.Meter(ScopeName)
	m := &Silo{silo: keySilo.String(silo)}
	var err error
	m.duration, err = meter.Float64Histogram(callDuration.Name, metric.WithUnit(callDuration.Unit),
		metric.WithDescription(callDuration.Description), metric.WithExplicitBucketBoundaries(callDurationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w", callDuration.Name, err)
	}
	if m.registration, err = registerObserved(meter, m.silo, observed, read); err != nil {
		return nil, err
	}
	return m, nil
}

// registration is a callback registered for some instruments.
type registration struct {
	reg  metric.Registration
	once sync.Once
}

// registerObserved creates the instruments of list and registers one
// callback that reads src once per collection and observes them all,
// each value with the silo's attribute.
func registerObserved[S any](meter metric.Meter, silo attribute.KeyValue, list []instrument[S], read func() S) (*registration, error) {
	instruments := make([]metric.Int64Observable, len(list))
	observables := make([]metric.Observable, len(list))
	for i, in := range list {
		inst, err := newObservable(meter, in.Name, in.Unit, in.Description, in.kind)
		if err != nil {
			return nil, err
		}
		instruments[i], observables[i] = inst, inst
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		src := read()
		for i, in := range list {
			inst := instruments[i]
			in.observe(&src, func(v int64, attrs ...attribute.KeyValue) {
				o.ObserveInt64(inst, v, metric.WithAttributes(append(attrs, silo)...))
			})
		}
		return nil
	}, observables...)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &registration{reg: reg}, nil
}

// Close unregisters the callback: collections report nothing more of its
// instruments. Safe to call twice.
func (r *registration) Close() error {
	var err error
	r.once.Do(func() { err = r.reg.Unregister() })
	if err != nil {
		return fmt.Errorf("metrics: unregister: %w", err)
	}
	return nil
}

// newObservable creates an asynchronous integer instrument.
func newObservable(meter metric.Meter, name, unit, description string, k kind) (metric.Int64Observable, error) {
	var (
		inst metric.Int64Observable
		err  error
	)
	switch k {
	case counter:
		inst, err = meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(description))
	default:
		inst, err = meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(description))
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w", name, err)
	}
	return inst, nil
}

// CallObserver returns the host's observer of one method's calls: it
// records their durations in the call duration histogram. The attribute
// sets are made here, once per method, so that a call allocates nothing.
func (m *Silo) CallObserver(grainType, method string) host.CallObserver {
	if method == "" {
		method = unknownMethod
	}
	var opts [host.NumOutcomes][]metric.RecordOption
	for o := range opts {
		set := attribute.NewSet(m.silo, keyGrainType.String(grainType), keyMethod.String(method), keyOutcome.String(host.Outcome(o).String()))
		opts[o] = []metric.RecordOption{metric.WithAttributeSet(set)}
	}
	return func(outcome host.Outcome, d time.Duration) {
		m.duration.Record(context.Background(), d.Seconds(), opts[outcome]...)
	}
}
