package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/granary-go/granary/grains/ratelimit"
)

// configEnv is the environment variable of the -config flag.
const configEnv = "GRANARY_CONFIG"

// errConfig is wrapped by every problem of the config file.
var errConfig = errors.New("config file")

// configFile is the config file, YAML or JSON (which YAML reads too):
//
//	silo:            # any flag, by its name: the same values as on the command line
//	  name: a
//	  seeds: [127.0.0.1:7946, 127.0.0.1:7947]
//	ratelimit:
//	  defaults:      # of limiters never configured; keys left out take the library defaults
//	    token-bucket: {token-limit: 100, tokens-per-period: 10, replenishment-period: 1s}
//	  configurations: # named, for holders, the middleware and the HTTP API; one name may
//	    api:          # have one configuration per algorithm
//	      fixed-window: {permit-limit: 50, window: 1s}
//
// docs/operations.md lists every key.
type configFile struct {
	Silo      map[string]any `yaml:"silo"`
	RateLimit limitConfig    `yaml:"ratelimit"`
}

// limitConfig is the config file's ratelimit section.
type limitConfig struct {
	Defaults       algorithms            `yaml:"defaults"`
	Configurations map[string]algorithms `yaml:"configurations"`
}

// algorithms holds options of some of the four algorithms.
type algorithms struct {
	Concurrency   *concurrencyKeys   `yaml:"concurrency"`
	FixedWindow   *fixedWindowKeys   `yaml:"fixed-window"`
	SlidingWindow *slidingWindowKeys `yaml:"sliding-window"`
	TokenBucket   *tokenBucketKeys   `yaml:"token-bucket"`
}

type concurrencyKeys struct {
	PermitLimit int64      `yaml:"permit-limit"`
	QueueLimit  int64      `yaml:"queue-limit"`
	QueueOrder  queueOrder `yaml:"queue-order"`
}

type fixedWindowKeys struct {
	PermitLimit         int64         `yaml:"permit-limit"`
	QueueLimit          int64         `yaml:"queue-limit"`
	QueueOrder          queueOrder    `yaml:"queue-order"`
	Window              time.Duration `yaml:"window"`
	ManualReplenishment bool          `yaml:"manual-replenishment"`
}

type slidingWindowKeys struct {
	PermitLimit         int64         `yaml:"permit-limit"`
	SegmentsPerWindow   int64         `yaml:"segments-per-window"`
	QueueLimit          int64         `yaml:"queue-limit"`
	QueueOrder          queueOrder    `yaml:"queue-order"`
	Window              time.Duration `yaml:"window"`
	ManualReplenishment bool          `yaml:"manual-replenishment"`
}

type tokenBucketKeys struct {
	TokenLimit          int64         `yaml:"token-limit"`
	TokensPerPeriod     int64         `yaml:"tokens-per-period"`
	QueueLimit          int64         `yaml:"queue-limit"`
	QueueOrder          queueOrder    `yaml:"queue-order"`
	ReplenishmentPeriod time.Duration `yaml:"replenishment-period"`
	ManualReplenishment bool          `yaml:"manual-replenishment"`
}

// queueOrder is a queue order in the file: oldest-first or newest-first.
type queueOrder ratelimit.QueueOrder

func (q *queueOrder) UnmarshalYAML(n *yaml.Node) error {
	switch strings.ToLower(n.Value) {
	case "oldest-first", "":
		*q = queueOrder(ratelimit.OldestFirst)
	case "newest-first":
		*q = queueOrder(ratelimit.NewestFirst)
	default:
		// A TypeError, so that the decoder goes on and reports the rest.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: queue-order %q: want oldest-first or newest-first", n.Line, n.Value)}}
	}
	return nil
}

// limits are the rate limiters' settings, as the silo uses them.
type limits struct {
	defaults ratelimit.Defaults
	configs  *ratelimit.Configs
}

// readConfigFile reads the config file at path; "" is no file. It reports
// every problem of its contents at once, and returns what it could read
// even then, so that the settings' own problems are reported too.
func readConfigFile(path string) (fileSettings, limits, error) {
	var (
		cfg  configFile
		errs []error
	)
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, limits{}, fmt.Errorf("%w: %w", errConfig, err)
		}
		// A wrong type or an unknown key leaves the rest decoded.
		if err := decodeConfig(data, &cfg); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	settings, settingsErrs := cfg.siloSettings(path)
	errs = append(errs, settingsErrs...)
	lim := limits{defaults: cfg.RateLimit.Defaults.defaults()}
	lim.defaults.EnsureDefaults()
	if err := lim.defaults.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%s: ratelimit.defaults: %w", path, err))
	}
	configs, err := ratelimit.NewConfigs(cfg.RateLimit.configs()...)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: ratelimit.configurations: %w", path, err))
	}
	lim.configs = configs
	if err := errors.Join(errs...); err != nil {
		return settings, lim, fmt.Errorf("%w: %w", errConfig, err)
	}
	return settings, lim, nil
}

// decodeConfig decodes YAML or JSON, refusing keys it does not know.
func decodeConfig(data []byte, cfg *configFile) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) { // an empty file sets nothing
		return err
	}
	return nil
}

// siloSettings turns the silo section into flag values: scalars as they
// are written, lists joined with commas (-seeds).
func (c *configFile) siloSettings(path string) (fileSettings, []error) {
	out := make(fileSettings, len(c.Silo))
	var errs []error
	for _, key := range sortedKeys(c.Silo) {
		v, err := flagValue(c.Silo[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: silo.%s: %w", path, key, err))
			continue
		}
		out[key] = v
	}
	return out, errs
}

func flagValue(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case int:
		return strconv.Itoa(v), nil
	case bool, float64, uint64, int64:
		return fmt.Sprint(v), nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, err := flagValue(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("want a value or a list, got %T", v)
}

// defaults returns the default options the section sets; what it leaves
// out stays zero, for Defaults.EnsureDefaults.
func (a algorithms) defaults() ratelimit.Defaults {
	var d ratelimit.Defaults
	if a.Concurrency != nil {
		d.Concurrency = a.Concurrency.options()
	}
	if a.FixedWindow != nil {
		d.FixedWindow = a.FixedWindow.options()
	}
	if a.SlidingWindow != nil {
		d.SlidingWindow = a.SlidingWindow.options()
	}
	if a.TokenBucket != nil {
		d.TokenBucket = a.TokenBucket.options()
	}
	return d
}

// configs returns the named configurations, sorted by name so that
// problems are reported in a stable order.
func (l limitConfig) configs() []ratelimit.Config {
	var out []ratelimit.Config
	for _, name := range sortedKeys(l.Configurations) {
		a := l.Configurations[name]
		if a.Concurrency != nil {
			out = append(out, ratelimit.Named(name, a.Concurrency.options()))
		}
		if a.FixedWindow != nil {
			out = append(out, ratelimit.Named(name, a.FixedWindow.options()))
		}
		if a.SlidingWindow != nil {
			out = append(out, ratelimit.Named(name, a.SlidingWindow.options()))
		}
		if a.TokenBucket != nil {
			out = append(out, ratelimit.Named(name, a.TokenBucket.options()))
		}
	}
	return out
}

func (k *concurrencyKeys) options() ratelimit.ConcurrencyOptions {
	return ratelimit.ConcurrencyOptions{PermitLimit: k.PermitLimit, QueueLimit: k.QueueLimit, QueueOrder: ratelimit.QueueOrder(k.QueueOrder)}
}

func (k *fixedWindowKeys) options() ratelimit.FixedWindowOptions {
	return ratelimit.FixedWindowOptions{PermitLimit: k.PermitLimit, QueueLimit: k.QueueLimit, QueueOrder: ratelimit.QueueOrder(k.QueueOrder),
		Window: k.Window, ManualReplenishment: k.ManualReplenishment}
}

func (k *slidingWindowKeys) options() ratelimit.SlidingWindowOptions {
	return ratelimit.SlidingWindowOptions{PermitLimit: k.PermitLimit, SegmentsPerWindow: k.SegmentsPerWindow, QueueLimit: k.QueueLimit,
		QueueOrder: ratelimit.QueueOrder(k.QueueOrder), Window: k.Window, ManualReplenishment: k.ManualReplenishment}
}

func (k *tokenBucketKeys) options() ratelimit.TokenBucketOptions {
	return ratelimit.TokenBucketOptions{TokenLimit: k.TokenLimit, TokensPerPeriod: k.TokensPerPeriod, QueueLimit: k.QueueLimit,
		QueueOrder: ratelimit.QueueOrder(k.QueueOrder), ReplenishmentPeriod: k.ReplenishmentPeriod, ManualReplenishment: k.ManualReplenishment}
}
