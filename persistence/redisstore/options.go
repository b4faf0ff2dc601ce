package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultAddr        = "localhost:6379"
	DefaultKeyPrefix   = "granary:"
	DefaultDialTimeout = 5 * time.Second
	// DefaultReadTimeout and DefaultWriteTimeout are below the flusher's
	// per-write timeout (persistence.DefaultWriteTimeout), so that a hung
	// server fails a call on its own terms first, with a clearer error.
	DefaultReadTimeout  = 3 * time.Second
	DefaultWriteTimeout = 3 * time.Second
	DefaultPoolTimeout  = 4 * time.Second
)

// DefaultPoolSize is the default of Options.PoolSize: ten connections per
// processor that Go may use (GOMAXPROCS), as go-redis chooses.
func DefaultPoolSize() int { return 10 * runtime.GOMAXPROCS(0) }

// Options are the data settings of a Store that New connects itself. The
// zero value, after EnsureDefaults, is a store on localhost:6379, database
// 0, without TLS or password, under the key prefix "granary:".
type Options struct {
	// Addr is the server's host:port. Default DefaultAddr.
	Addr string
	// Username names the ACL user to authenticate as; leave it empty to
	// authenticate with Password alone (requirepass). Default none.
	Username string
	// Password authenticates the connection. It never appears in String
	// or in errors. Default none.
	Password string
	// DB is the database number to select. Default 0.
	DB int
	// TLS, if not nil, makes every connection use TLS with this
	// configuration. Default nil: plain TCP.
	TLS *tls.Config
	// KeyPrefix begins every key the store writes. Give each cluster its
	// own (for example "granary:prod:") to share one Redis between
	// clusters. It must not contain '{' or '}', which would break the hash
	// tag that keeps a grain's keys in one Redis Cluster slot. Default
	// DefaultKeyPrefix.
	KeyPrefix string
	// PoolSize is how many connections the store keeps at most for
	// concurrent calls. Default DefaultPoolSize().
	PoolSize int
	// DialTimeout bounds opening a connection. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// ReadTimeout bounds waiting for one reply. A context deadline that
	// comes first wins. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds sending one command. A context deadline that
	// comes first wins. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// PoolTimeout bounds waiting for a free connection when all PoolSize
	// are busy. Default DefaultPoolTimeout.
	PoolTimeout time.Duration
}

// EnsureDefaults replaces every zero field that has a default with it and
// returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize()
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = DefaultPoolTimeout
	}
	return o
}

// Validate reports every invalid field at once, joined into one error, or
// nil. Call it after EnsureDefaults: zero values are invalid until
// defaulted.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("redisstore: Options."+format, args...))
	}
	if host, port, err := net.SplitHostPort(o.Addr); err != nil {
		bad("Addr %q: %v", o.Addr, err)
	} else if host == "" {
		bad("Addr %q: the host is missing", o.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		bad("Addr %q: the port must be a number from 1 to 65535", o.Addr)
	}
	if o.DB < 0 {
		bad("DB must not be negative, got %d", o.DB)
	}
	if err := checkKeyPrefix(o.KeyPrefix); err != nil {
		bad("KeyPrefix %v", err)
	}
	if o.PoolSize <= 0 {
		bad("PoolSize must be positive, got %d", o.PoolSize)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"DialTimeout", o.DialTimeout},
		{"ReadTimeout", o.ReadTimeout},
		{"WriteTimeout", o.WriteTimeout},
		{"PoolTimeout", o.PoolTimeout},
	} {
		if d.value <= 0 {
			bad("%s must be positive, got %v", d.name, d.value)
		}
	}
	return errors.Join(errs...)
}

// checkKeyPrefix refuses a prefix that is empty or holds a brace.
func checkKeyPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("must not be empty")
	}
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%q must not contain '{' or '}': they would end the grain's hash tag", prefix)
	}
	return nil
}

// String describes where the store connects, for a startup log: the URL
// without the password, and the key prefix.
func (o Options) String() string {
	u := url.URL{Scheme: "redis", Host: o.Addr, Path: "/" + strconv.Itoa(o.DB)}
	if o.TLS != nil {
		u.Scheme = "rediss"
	}
	if o.Username != "" {
		u.User = url.User(o.Username)
	}
	auth := ""
	if o.Password != "" {
		auth = ", with password"
	}
	return fmt.Sprintf("%s (key prefix %q%s)", u.String(), o.KeyPrefix, auth)
}

// URL query parameters that ParseURL understands, besides the URL's parts.
var urlDurations = map[string]func(*Options) *time.Duration{
	"dial_timeout":  func(o *Options) *time.Duration { return &o.DialTimeout },
	"read_timeout":  func(o *Options) *time.Duration { return &o.ReadTimeout },
	"write_timeout": func(o *Options) *time.Duration { return &o.WriteTimeout },
	"pool_timeout":  func(o *Options) *time.Duration { return &o.PoolTimeout },
}

// ParseURL parses a Redis URL into Options:
//
//	redis://[[username]:password@]host[:port][/db][?param=value&...]
//
// The scheme rediss means TLS, verified against the host name. The port
// defaults to 6379 and the database to 0. The parameters are prefix (the
// KeyPrefix), pool_size, and dial_timeout, read_timeout, write_timeout and
// pool_timeout as Go durations ("250ms"); others are refused. Fields the
// URL leaves out take their defaults, and the result passes Validate.
func ParseURL(rawURL string) (Options, error) {
	var o Options
	u, err := url.Parse(rawURL)
	if err != nil {
		return Options{}, fmt.Errorf("redisstore: parse URL: %w", errors.Unwrap(err))
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		o.TLS = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	default:
		return Options{}, fmt.Errorf("redisstore: URL scheme %q: want redis or rediss", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return Options{}, errors.New("redisstore: URL has no host: want redis://host:port/db")
	}
	o.Addr = u.Host
	if u.Port() == "" {
		o.Addr = net.JoinHostPort(u.Hostname(), "6379")
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil {
			return Options{}, fmt.Errorf("redisstore: URL path %q: want /<database number>", u.Path)
		}
		o.DB = n
	}
	if u.Fragment != "" {
		return Options{}, errors.New("redisstore: URL has a fragment")
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Options{}, fmt.Errorf("redisstore: URL query: %w", err)
	}
	var errs []error
	for name, values := range query {
		value := values[len(values)-1]
		if len(values) > 1 {
			errs = append(errs, fmt.Errorf("redisstore: URL parameter %s given %d times", name, len(values)))
		}
		switch field := urlDurations[name]; {
		case field != nil:
			d, err := time.ParseDuration(value)
			if err != nil {
				errs = append(errs, fmt.Errorf("redisstore: URL parameter %s: %w", name, err))
			}
			*field(&o) = d
		case name == "prefix":
			o.KeyPrefix = value
			if err := checkKeyPrefix(value); err != nil {
				errs = append(errs, fmt.Errorf("redisstore: URL parameter prefix %w", err))
			}
		case name == "pool_size":
			n, err := strconv.Atoi(value)
			if err != nil {
				errs = append(errs, fmt.Errorf("redisstore: URL parameter pool_size: %w", err))
			}
			o.PoolSize = n
		default:
			errs = append(errs, fmt.Errorf("redisstore: URL parameter %q is not one of prefix, pool_size, dial_timeout, read_timeout, write_timeout, pool_timeout", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, err
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}
