package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/internal/fence"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/silo"
)

// Every setting of the silo is a flag, has an environment variable, and is
// a key of the config file's silo section under the flag's name. The first
// of these that sets it wins: the command line, the environment, the
// config file, the built-in default. The file is what silos share; the
// environment and the command line say what one process does otherwise.

// settings are the flags of a FlagSet with the environment variable of
// each.
type settings struct {
	fs    *flag.FlagSet
	env   map[string]string // flag name -> environment variable
	names []string          // in the order defined
}

func newSettings(fs *flag.FlagSet) *settings {
	return &settings{fs: fs, env: make(map[string]string)}
}

func (s *settings) add(name, env string) {
	s.env[name] = env
	s.names = append(s.names, name)
}

// stringVar defines a string setting.
func (s *settings) stringVar(p *string, name, env, def, usage string) {
	s.fs.StringVar(p, name, def, usage+" ($"+env+")")
	s.add(name, env)
}

// boolVar defines a boolean setting.
func (s *settings) boolVar(p *bool, name, env string, def bool, usage string) {
	s.fs.BoolVar(p, name, def, usage+" ($"+env+")")
	s.add(name, env)
}

// intVar defines an integer setting.
func (s *settings) intVar(p *int, name, env string, def int, usage string) {
	s.fs.IntVar(p, name, def, usage+" ($"+env+")")
	s.add(name, env)
}

// durationVar defines a duration setting.
func (s *settings) durationVar(p *time.Duration, name, env string, def time.Duration, usage string) {
	s.fs.DurationVar(p, name, def, usage+" ($"+env+")")
	s.add(name, env)
}

// fileSettings are the config file's silo section: flag names to values.
type fileSettings map[string]string

// apply sets every setting the command line did not from its environment
// variable, else from the config file. It reports every bad value, and
// every key of the file that names no setting.
func (s *settings) apply(file fileSettings, fileName string) error {
	onCommandLine := make(map[string]bool)
	s.fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	for _, name := range s.names {
		if onCommandLine[name] {
			continue
		}
		env := s.env[name]
		if v, ok := os.LookupEnv(env); ok {
			if err := s.set(name, v); err != nil {
				errs = append(errs, fmt.Errorf("$%s %q: %w", env, v, err))
			}
			continue
		}
		if v, ok := file[name]; ok {
			if err := s.set(name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: silo.%s %q: %w", fileName, name, v, err))
			}
		}
	}
	for _, key := range sortedKeys(file) {
		if _, ok := s.env[key]; !ok {
			errs = append(errs, fmt.Errorf("%s: silo.%s: no such setting (the keys are the flags' names)", fileName, key))
		}
	}
	return errors.Join(errs...)
}

// set sets a flag, leaving it as it was when the value is bad: the bad
// value is reported once, not again as the zero value it would leave.
func (s *settings) set(name, value string) error {
	f := s.fs.Lookup(name)
	prev := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		_ = f.Value.Set(prev)
		return err
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// siloFlags are the silo's settings that come from flags.
type siloFlags struct {
	opts          silo.Options
	gateway       string
	seeds         string
	secretFile    string
	timings       string
	fenceMinSilos int
	deathFence    bool
	stopTimeout   time.Duration
	// limiterCollectionAge is the collection age of the limiter grains
	// (0: -collection-age).
	limiterCollectionAge time.Duration
	store                string
	http                 string
	admin                string
	shutdownDelay        time.Duration
	expectSilos          int

	apiDisableChanges bool
	apiMaxKeyBytes    int
	credentials       credentialFlags
	envoy             envoyFlags
}

// limiterGrainTypes are the grain types -limiter-collection-age applies to.
var limiterGrainTypes = []string{
	ratelimitpb.ConcurrencyLimiterGrainType, ratelimitpb.FixedWindowLimiterGrainType,
	ratelimitpb.SlidingWindowLimiterGrainType, ratelimitpb.TokenBucketLimiterGrainType,
}

// httpDefault is where the HTTP port listens by default.
const httpDefault = "127.0.0.1:8080"

// defineSiloFlags defines the flags of the silo's own settings.
func defineSiloFlags(s *settings) *siloFlags {
	f := &siloFlags{}
	o := &f.opts
	s.stringVar(&o.Name, "name", "GRANARY_NAME", "", "silo name, unique in the cluster (default hostname-pid)")
	s.stringVar(&f.gateway, "gateway", "GRANARY_GATEWAY", silo.DefaultGatewayAddress, "where clients connect (host:port; port 0 picks one; none: no gateway)")
	s.stringVar(&o.Cluster.SiloAddress, "silo-address", "GRANARY_SILO_ADDRESS", "", "where other silos connect (host:port); setting it makes the silo join a cluster")
	s.stringVar(&o.Cluster.AdvertiseAddress, "advertise", "GRANARY_ADVERTISE", "", "the address other silos dial for -silo-address, when it differs (0.0.0.0, NAT)")
	s.stringVar(&o.Cluster.GossipAddress, "gossip", "GRANARY_GOSSIP", "127.0.0.1:7946", "where the silo gossips with the others (IP:port); address settings may name environment variables or interfaces: ${POD_IP}:7946, ${interface:eth0}:7946")
	s.stringVar(&o.Cluster.AdvertiseGossipAddress, "advertise-gossip", "GRANARY_ADVERTISE_GOSSIP", "", "the gossip address other silos use, when it differs")
	s.stringVar(&f.seeds, "seeds", "GRANARY_SEEDS", "", "gossip addresses of the cluster's silos, comma-separated; give every silo the same list, itself included: a silo waits until another seed answers (none, or only itself: start a new cluster)")
	s.boolVar(&o.Cluster.Bootstrap, "bootstrap", "GRANARY_BOOTSTRAP", false, "form a new cluster if no other seed answers at once: only to rebuild a cluster whose other silos are gone for good; dangerous on a restart (a second cluster forms if the others are briefly unreachable)")
	s.stringVar(&o.Security.ClusterID, "cluster-id", "GRANARY_CLUSTER_ID", silo.DefaultClusterID, "the cluster's name: silos and clients of another are refused")
	s.stringVar(&f.secretFile, "secret-file", "GRANARY_SECRET_FILE", "", "a file holding the cluster's secret (16 bytes or more): the silos' credential, required of every silo of a cluster, never given to clients")
	s.stringVar(&f.timings, "timings", "GRANARY_TIMINGS", "lan", "failure detection profile: lan, or fast (one machine, tests)")
	s.boolVar(&f.deathFence, "death-fence", "GRANARY_DEATH_FENCE", true, "the death fence: a silo that another declared dead while it ran, or that did not run for long enough to have been, refuses calls, deactivates its grains and is not ready until the cluster has taken it back (false: off)")
	s.intVar(&f.fenceMinSilos, "fence-min-silos", "GRANARY_FENCE_MIN_SILOS", fence.DefaultMinSilos, "the minority fence: in a cluster of at least this many silos, a silo that cannot reach a majority refuses calls and is not ready (0: no fence)")
	s.durationVar(&f.stopTimeout, "stop-timeout", "GRANARY_STOP_TIMEOUT", 30*time.Second, "how long a graceful stop may take")
	s.durationVar(&o.CollectionAge, "collection-age", "GRANARY_COLLECTION_AGE", host.DefaultCollectionAge, "how long an idle grain stays in memory before it is deactivated")
	s.intVar(&o.Limits.MaxConnectionsPerSource, "max-connections-per-source", "GRANARY_MAX_CONNECTIONS_PER_SOURCE", transport.DefaultMaxConnectionsPerSource, "the most client connections the gateway takes from one source IP; one more is closed before its handshake (negative: no bound)")
	s.intVar(&o.Limits.SharedInFlight, "shared-in-flight", "GRANARY_SHARED_IN_FLIGHT", rpc.DefaultSharedInFlight, "the calls in flight that the clients busy at once share (a client: the connections of one credential, or one connection without): each may have its part (at least 16); one more is answered overloaded")
	s.intVar(&o.Limits.SharedActivations, "shared-activations", "GRANARY_SHARED_ACTIVATIONS", rpc.DefaultSharedActivations, "the new activations under way that the clients busy at once share: each may have its part (at least 1); one more is answered overloaded (negative: no share)")
	s.intVar(&o.Limits.MaxKeyLength, "max-key-length", "GRANARY_MAX_KEY_LENGTH", rpc.DefaultMaxKeyLength, "the longest grain key a client's call may name, in bytes; a longer one is answered bad_request (negative: no bound)")
	s.durationVar(&f.limiterCollectionAge, "limiter-collection-age", "GRANARY_LIMITER_COLLECTION_AGE", 0, "-collection-age for the rate limiters (0: -collection-age); a limiter back at full quota goes within about a minute whatever its age")
	s.stringVar(&f.store, "store", storeEnv, "memory", "where grain state lives: memory, or redis://[[user]:password@]host:port/db[?prefix=granary:] (rediss:// for TLS)")
	s.stringVar(&f.http, "http", "GRANARY_HTTP", httpDefault, "where the HTTP port listens: the rate-limit API, /healthz, /readyz, /cluster, /metrics (host:port; none: no HTTP port)")
	s.stringVar(&f.admin, "admin", "GRANARY_ADMIN", adminDefault, "where the operator's admin port listens: /debug/pprof/ and the rate-limit API with changes allowed (host:port, loopback or a private network; none: off)")
	s.boolVar(&f.apiDisableChanges, "api-disable-changes", "GRANARY_API_DISABLE_CHANGES", true, "the public port's rate-limit API refuses Configure, Reset, DeleteState, TryReplenish and Acquire with explicit options (changes need the admin right: the admin port); false opens them to every caller")
	s.intVar(&f.apiMaxKeyBytes, "api-max-key-bytes", "GRANARY_API_MAX_KEY_BYTES", ratelimitapi.DefaultMaxKeyBytes, "the longest limiter key the rate-limit API (HTTP and admin ports) takes, in bytes; a longer one is answered 400 invalid_argument before any grain sees it")
	defineCredentialFlags(s, &f.credentials)
	defineEnvoyFlags(s, &f.envoy)
	s.durationVar(&f.shutdownDelay, "shutdown-delay", "GRANARY_SHUTDOWN_DELAY", 0, "how long /readyz answers 503 after a stop signal before the HTTP port closes, for load balancers to notice")
	s.intVar(&f.expectSilos, "expect-silos", "GRANARY_EXPECT_SILOS", 0, "/readyz answers 503 while this silo sees fewer active silos, itself included (0: no minimum)")
	return f
}

// options turns the settings into the silo's options, reporting every
// problem, the silo options' own validation included.
func (f *siloFlags) options() (silo.Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := f.expandAddresses(); err != nil {
		errs = append(errs, err)
	}
	o := f.opts
	if f.stopTimeout <= 0 {
		bad("-stop-timeout must be positive, got %v", f.stopTimeout)
	}
	if o.CollectionAge <= 0 {
		bad("-collection-age must be positive, got %v", o.CollectionAge)
	}
	switch {
	case f.limiterCollectionAge < 0:
		bad("-limiter-collection-age must not be negative, got %v", f.limiterCollectionAge)
	case f.limiterCollectionAge > 0:
		o.CollectionAges = make(map[string]time.Duration, len(limiterGrainTypes))
		for _, t := range limiterGrainTypes {
			o.CollectionAges[t] = f.limiterCollectionAge
		}
	}
	if f.shutdownDelay < 0 {
		bad("-shutdown-delay must not be negative, got %v", f.shutdownDelay)
	}
	if f.shutdownDelay >= f.stopTimeout && f.stopTimeout > 0 {
		bad("-shutdown-delay %v leaves nothing of -stop-timeout %v for the stop itself", f.shutdownDelay, f.stopTimeout)
	}
	if f.expectSilos < 0 {
		bad("-expect-silos must not be negative, got %d", f.expectSilos)
	}
	if f.expectSilos > 1 && o.Cluster.SiloAddress == "" {
		bad("-expect-silos %d needs -silo-address: a silo alone sees only itself", f.expectSilos)
	}
	if err := checkHTTPAddress(f.http); err != nil {
		errs = append(errs, err)
	}
	if err := checkAddress("-admin", f.admin); err != nil {
		errs = append(errs, err)
	}
	if err := checkStore(f.store); err != nil {
		errs = append(errs, err)
	}
	if err := f.envoy.check(); err != nil {
		errs = append(errs, err)
	}
	if f.gateway == "none" {
		o.DisableGateway = true
	} else {
		o.GatewayAddress = f.gateway
	}
	if f.secretFile != "" {
		secret, err := os.ReadFile(f.secretFile)
		if err != nil {
			bad("-secret-file: %w", err)
		}
		o.Security.Secret = []byte(strings.TrimSpace(string(secret)))
	}
	if o.Cluster.SiloAddress == "" {
		if f.seeds != "" {
			bad("-seeds needs -silo-address: a silo joins a cluster only with an address for other silos")
		}
	} else {
		o.Cluster.Enabled = true
		for _, seed := range strings.Split(f.seeds, ",") {
			if seed = strings.TrimSpace(seed); seed != "" {
				o.Cluster.Seeds = append(o.Cluster.Seeds, seed)
			}
		}
	}
	if err := f.credentials.apply(&o); err != nil { // after the cluster's settings: links take the CA
		errs = append(errs, err)
	}
	switch f.timings {
	case "lan":
		o.Cluster.Timings = cluster.LANTimings()
	case "fast":
		o.Cluster.Timings = cluster.FastTimings()
	default:
		bad("-timings %q: want lan or fast", f.timings)
	}
	switch {
	case f.fenceMinSilos == 0:
		o.Cluster.Fence.Disabled = true
	case f.fenceMinSilos < 0:
		bad("-fence-min-silos must not be negative, got %d", f.fenceMinSilos)
	default:
		o.Cluster.Fence.MinSilos = f.fenceMinSilos
	}
	o.Cluster.Fence.Death.Disabled = !f.deathFence
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// checkHTTPAddress checks the -http value: none, or host:port with a
// numeric port.
func checkHTTPAddress(addr string) error { return checkAddress("-http", addr) }

// checkAddress checks the value of an address flag: none, or host:port
// with a numeric port.
func checkAddress(flag, addr string) error {
	if addr == "none" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("%s %q: want host:port or none: %w", flag, addr, err)
	}
	return nil
}
