package envoyrls

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/grains/ratelimit"
)

// ErrInvalidConfig is wrapped by every problem Load and Parse report.
var ErrInvalidConfig = errors.New("envoyrls: invalid configuration")

// The file format is envoyproxy/ratelimit's: one domain per YAML document,
// its descriptors nested by key and value. The keys below are the ones it
// reads; algorithm and the keys after it are granary's.
type yamlDomain struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	Metadata       map[string]any   `yaml:"metadata"`
}

type yamlRateLimit struct {
	Name            string         `yaml:"name"`
	Replaces        []yamlReplaces `yaml:"replaces"`
	Unit            string         `yaml:"unit"`
	RequestsPerUnit uint32         `yaml:"requests_per_unit"`
	Unlimited       bool           `yaml:"unlimited"`

	// granary's: the algorithm and its options. The window (or the
	// replenishment period) is the unit unless set.
	Algorithm           string        `yaml:"algorithm"`
	SegmentsPerWindow   int64         `yaml:"segments_per_window"`
	TokensPerPeriod     int64         `yaml:"tokens_per_period"`
	ReplenishmentPeriod time.Duration `yaml:"replenishment_period"`
}

type yamlReplaces struct {
	Name string `yaml:"name"`
}

// Algorithms a rate_limit may name. fixed_window is what envoyproxy/ratelimit
// counts with, and the default.
const (
	AlgorithmFixedWindow   = "fixed_window"
	AlgorithmSlidingWindow = "sliding_window"
	AlgorithmTokenBucket   = "token_bucket"
)

// Config is a checked set of domains, immutable once built: the server
// swaps whole configs on reload.
type Config struct {
	domains map[string]*node
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// entryKey names a child: a key with a value, or a key alone (value "")
// which matches any value the request gives.
type entryKey struct{ key, value string }

// node is one level of a domain's descriptor tree.
type node struct {
	children  map[entryKey]*node
	wildcards []wildcard // in the file's order: the first that matches wins
	rule      *rule      // nil: no limit at this level
	// sharedPattern is the wildcard value every match shares a limit
	// under (share_threshold); "" keeps one limit per value.
	sharedPattern string
}

// wildcard is a child whose value has a '*': parts is the value split at
// each '*', which matches any run of characters.
type wildcard struct {
	key   string
	parts []string
	child *node
}

// rule is a rate_limit of the file, checked and ready to be acquired
// from.
type rule struct {
	name      string   // rate_limit.name, for replaces
	replaces  []string // names this rule drops when it applies
	unlimited bool
	shadow    bool
	// limit is what the statuses report as current_limit.
	limit *rlsv3.RateLimitResponse_RateLimit
	// window is the unit times its multiplier: the reset a grant reports,
	// and reset the same as a message (nil for a limit override, made per
	// request).
	window  time.Duration
	reset   *durationpb.Duration
	options any // ratelimit.FixedWindowOptions, SlidingWindowOptions or TokenBucketOptions
}

// Load reads the configuration at path: a YAML file of one or more
// documents (one domain each), or a directory whose *.yaml and *.yml files
// are read in name order, as envoyproxy/ratelimit reads its runtime
// directory. It reports every problem of every file at once.
func Load(path string) (*Config, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	var (
		docs []document
		errs []error
	)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
			continue
		}
		d, err := decode(f, data)
		docs = append(docs, d...)
		errs = append(errs, err)
	}
	c, err := build(docs)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse checks the YAML data as Load checks a file; name is what its
// problems are reported under.
func Parse(name string, data []byte) (*Config, error) {
	docs, decodeErr := decode(name, data)
	c, err := build(docs)
	if err := errors.Join(decodeErr, err); err != nil {
		return nil, err
	}
	return c, nil
}

// configFiles lists the files of path.
func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			files = append(files, filepath.Join(path, name))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s: no *.yaml or *.yml file", ErrInvalidConfig, path)
	}
	return files, nil
}

// document is one decoded YAML document and where it came from.
type document struct {
	source string // file name, and document number when a file has several
	domain yamlDomain
}

// decode decodes every YAML document of data, refusing keys the format
// does not have. A document with a wrong type or an unknown key is still
// returned as far as it decoded, so that its other problems are found.
func decode(name string, data []byte) ([]document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var (
		docs []document
		errs []error
	)
	for i := 1; ; i++ {
		var d yamlDomain
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		source := name
		if i > 1 {
			source = fmt.Sprintf("%s (document %d)", name, i)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, source, err))
			var typeErr *yaml.TypeError
			if !errors.As(err, &typeErr) {
				break // a syntax error: the decoder cannot go on
			}
		}
		docs = append(docs, document{source: source, domain: d})
	}
	return docs, errors.Join(errs...)
}

// build checks the documents and compiles their descriptor trees,
// reporting every problem.
func build(docs []document) (*Config, error) {
	c := &Config{domains: make(map[string]*node, len(docs))}
	var p problems
	for _, d := range docs {
		if d.domain.Domain == "" {
			p.add(d.source, "", "the domain is empty")
			continue
		}
		if _, dup := c.domains[d.domain.Domain]; dup {
			p.add(d.source, "", fmt.Sprintf("domain %q is configured twice", d.domain.Domain))
			continue
		}
		root := &node{}
		p.source = d.source
		p.descriptors(root, d.domain.Domain, d.domain.Descriptors)
		c.domains[d.domain.Domain] = root
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

// problems collects the problems of a configuration, each with the file
// and the descriptor path it was found at.
type problems struct {
	source string
	errs   []error
}

func (p *problems) add(source, path, msg string) {
	if path != "" {
		msg = path + ": " + msg
	}
	p.errs = append(p.errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, source, msg))
}

// descriptors checks one level of descriptors and compiles it under n.
func (p *problems) descriptors(n *node, parent string, list []yamlDescriptor) {
	for i, d := range list {
		path := fmt.Sprintf("%s.descriptors[%d]", parent, i)
		if d.Key == "" {
			p.add(p.source, path, "the key is empty")
			continue
		}
		path = fmt.Sprintf("%s(%s)", path, describeEntry(d.Key, d.Value))
		ek := entryKey{d.Key, d.Value}
		if _, dup := n.children[ek]; dup {
			p.add(p.source, path, "the same key and value appear twice at this level")
			continue
		}
		child := &node{}
		if d.RateLimit != nil {
			child.rule = p.rule(path, d)
		}
		if d.QuotaMode {
			p.add(p.source, path, "quota_mode is not supported")
		}
		hasWildcard := strings.Contains(d.Value, "*")
		if d.ShareThreshold {
			if hasWildcard {
				child.sharedPattern = d.Value
			} else {
				p.add(p.source, path, "share_threshold needs a wildcard value (with a '*')")
			}
		}
		p.descriptors(child, path, d.Descriptors)
		if n.children == nil {
			n.children = make(map[entryKey]*node)
		}
		n.children[ek] = child
		if hasWildcard {
			n.wildcards = append(n.wildcards, wildcard{key: d.Key, parts: strings.Split(d.Value, "*"), child: child})
		}
	}
}

func describeEntry(key, value string) string {
	if value == "" {
		return key
	}
	return key + "=" + value
}

// units are the units of a rate_limit, with their length: a month is 30
// days and a year 365, as envoyproxy/ratelimit counts them.
var units = map[string]struct {
	unit   rlsv3.RateLimitResponse_RateLimit_Unit
	length time.Duration
}{
	"second": {rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	"minute": {rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	"hour":   {rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	"day":    {rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
	"week":   {rlsv3.RateLimitResponse_RateLimit_WEEK, 7 * 24 * time.Hour},
	"month":  {rlsv3.RateLimitResponse_RateLimit_MONTH, 30 * 24 * time.Hour},
	"year":   {rlsv3.RateLimitResponse_RateLimit_YEAR, 365 * 24 * time.Hour},
}

// unitLength returns the length of a unit of the wire enum; 0 for UNKNOWN.
func unitLength(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	for _, e := range units {
		if e.unit == u {
			return e.length
		}
	}
	return 0
}

// rule checks a descriptor's rate_limit and compiles it.
func (p *problems) rule(path string, d yamlDescriptor) *rule {
	rl := d.RateLimit
	path += ".rate_limit"
	r := &rule{name: rl.Name, unlimited: rl.Unlimited, shadow: d.ShadowMode}
	for _, rep := range rl.Replaces {
		switch rep.Name {
		case "":
			p.add(p.source, path, "a replaces entry has no name")
		case rl.Name:
			p.add(p.source, path, fmt.Sprintf("replaces names its own rule %q", rl.Name))
		default:
			r.replaces = append(r.replaces, rep.Name)
		}
	}
	u, known := units[strings.ToLower(rl.Unit)]
	if rl.Unlimited {
		if rl.Unit != "" {
			p.add(p.source, path, "an unlimited rate_limit has no unit")
		}
		if rl.Algorithm != "" || rl.SegmentsPerWindow != 0 || rl.TokensPerPeriod != 0 || rl.ReplenishmentPeriod != 0 {
			p.add(p.source, path, "an unlimited rate_limit has no algorithm or algorithm options")
		}
		return r
	}
	if !known {
		p.add(p.source, path, fmt.Sprintf("unit %q: want second, minute, hour, day, week, month or year", rl.Unit))
		return r
	}
	r.limit = &rlsv3.RateLimitResponse_RateLimit{Name: rl.Name, RequestsPerUnit: rl.RequestsPerUnit, Unit: u.unit}
	r.window, r.reset = u.length, durationpb.New(u.length)
	opts, err := algorithmOptions(rl.Algorithm, int64(rl.RequestsPerUnit), u.length, rl.SegmentsPerWindow, rl.TokensPerPeriod, rl.ReplenishmentPeriod)
	if err != nil {
		p.add(p.source, path, err.Error())
	}
	r.options = opts
	return r
}

// algorithmOptions returns the options of a limit of permits per window
// under the named algorithm. A limit of 0 refuses everything without
// asking a grain, so its options are not checked.
func algorithmOptions(algorithm string, permits int64, window time.Duration, segments, tokensPerPeriod int64, period time.Duration) (any, error) {
	var (
		opts any
		errs []error
	)
	noOption := func(name string, set bool) {
		if set {
			errs = append(errs, fmt.Errorf("%s does not apply to %s", name, cmp.Or(algorithm, AlgorithmFixedWindow)))
		}
	}
	switch algorithm {
	case "", AlgorithmFixedWindow:
		noOption("segments_per_window", segments != 0)
		noOption("tokens_per_period", tokensPerPeriod != 0)
		noOption("replenishment_period", period != 0)
		opts = ratelimit.FixedWindowOptions{PermitLimit: permits, Window: window}
	case AlgorithmSlidingWindow:
		noOption("tokens_per_period", tokensPerPeriod != 0)
		noOption("replenishment_period", period != 0)
		if segments == 0 {
			segments = ratelimit.DefaultSegmentsPerWindow
		}
		opts = ratelimit.SlidingWindowOptions{PermitLimit: permits, Window: window, SegmentsPerWindow: segments}
	case AlgorithmTokenBucket:
		noOption("segments_per_window", segments != 0)
		if tokensPerPeriod == 0 {
			tokensPerPeriod = permits
		}
		if period == 0 {
			period = window
		}
		opts = ratelimit.TokenBucketOptions{TokenLimit: permits, TokensPerPeriod: tokensPerPeriod, ReplenishmentPeriod: period}
	default:
		return nil, fmt.Errorf("algorithm %q: want %s, %s or %s", algorithm, AlgorithmFixedWindow, AlgorithmSlidingWindow, AlgorithmTokenBucket)
	}
	if permits > 0 {
		if err := opts.(interface{ Validate() error }).Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return opts, errors.Join(errs...)
}

// overrideRule is the rule of a descriptor whose request carries its own
// limit (Envoy's limit override): a fixed window of the given size.
func overrideRule(requests uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, multiplier uint32) (*rule, bool) {
	length := unitLength(unit)
	if length == 0 {
		return nil, false
	}
	if multiplier == 0 {
		multiplier = 1
	}
	if time.Duration(multiplier) > math.MaxInt64/length {
		return nil, false
	}
	window := length * time.Duration(multiplier)
	r := &rule{
		limit:   &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: requests, Unit: unit},
		window:  window,
		options: ratelimit.FixedWindowOptions{PermitLimit: int64(requests), Window: window},
	}
	if multiplier != 1 {
		r.limit.UnitMultiplier = wrapperspb.UInt32(multiplier)
	}
	return r, true
}
