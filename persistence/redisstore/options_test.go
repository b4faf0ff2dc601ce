package redisstore_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/persistence/redisstore"
)

func TestOptionsDefaults(t *testing.T) {
	var o redisstore.Options
	o.EnsureDefaults()
	assert.Equal(t, redisstore.Options{
		Addr:         "localhost:6379",
		KeyPrefix:    "granary:",
		PoolSize:     redisstore.DefaultPoolSize(),
		DialTimeout:  5 * time.Second,
		ReadTimeout:  3 * time.Second,
		WriteTimeout: 3 * time.Second,
		PoolTimeout:  4 * time.Second,
	}, o)
	assert.NoError(t, o.Validate())

	kept := redisstore.Options{Addr: "redis:7000", DB: 2, KeyPrefix: "p:", PoolSize: 3, ReadTimeout: time.Second}
	kept.EnsureDefaults()
	assert.Equal(t, "redis:7000", kept.Addr)
	assert.Equal(t, 2, kept.DB)
	assert.Equal(t, "p:", kept.KeyPrefix)
	assert.Equal(t, 3, kept.PoolSize)
	assert.Equal(t, time.Second, kept.ReadTimeout)
}

func TestOptionsValidateReportsEveryField(t *testing.T) {
	o := redisstore.Options{
		Addr: "no-port", DB: -1, KeyPrefix: "a{b}", PoolSize: -1,
		DialTimeout: -1, ReadTimeout: -1, WriteTimeout: -1, PoolTimeout: -1,
	}
	err := o.Validate()
	require.Error(t, err)
	for _, field := range []string{"Addr", "DB", "KeyPrefix", "PoolSize", "DialTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout"} {
		assert.ErrorContains(t, err, "redisstore: Options."+field)
	}

	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:redis", ":6379"} {
		o := redisstore.Options{Addr: addr}
		assert.ErrorContains(t, o.EnsureDefaults().Validate(), "Options.Addr", addr)
	}
	_, err = redisstore.New(redisstore.Options{KeyPrefix: "{tag}"})
	assert.ErrorContains(t, err, "KeyPrefix", "New validates")
}

func TestOptionsStringHidesThePassword(t *testing.T) {
	o := redisstore.Options{Addr: "db.example:6380", Username: "silo", Password: "hunter2", DB: 4, KeyPrefix: "granary:prod:"}
	assert.Equal(t, `redis://silo@db.example:6380/4 (key prefix "granary:prod:", with password)`, o.String())
	o.TLS = &tls.Config{}
	o.Username = ""
	assert.Equal(t, `rediss://db.example:6380/4 (key prefix "granary:prod:", with password)`, o.String())
}

func TestParseURL(t *testing.T) {
	defaults := func(o redisstore.Options) redisstore.Options { return *o.EnsureDefaults() }
	tests := []struct {
		url  string
		want redisstore.Options
	}{
		{"redis://localhost:6379/0", defaults(redisstore.Options{Addr: "localhost:6379"})},
		{"redis://10.0.0.5", defaults(redisstore.Options{Addr: "10.0.0.5:6379"})},
		{"redis://[::1]:7000/3", defaults(redisstore.Options{Addr: "[::1]:7000", DB: 3})},
		{"redis://:pw@h:1/", defaults(redisstore.Options{Addr: "h:1", Password: "pw"})},
		{"redis://user:p%40ss@h:1/2", defaults(redisstore.Options{Addr: "h:1", Username: "user", Password: "p@ss", DB: 2})},
		{
			"redis://h:1/0?prefix=granary:prod:&pool_size=7&dial_timeout=1s&read_timeout=250ms&write_timeout=2s&pool_timeout=3s",
			defaults(redisstore.Options{
				Addr: "h:1", KeyPrefix: "granary:prod:", PoolSize: 7,
				DialTimeout: time.Second, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 2 * time.Second, PoolTimeout: 3 * time.Second,
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := redisstore.ParseURL(tt.url)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	tlsOpts, err := redisstore.ParseURL("rediss://cache.example:6380/1")
	require.NoError(t, err)
	require.NotNil(t, tlsOpts.TLS)
	assert.Equal(t, "cache.example", tlsOpts.TLS.ServerName)
	assert.Equal(t, uint16(tls.VersionTLS12), tlsOpts.TLS.MinVersion)
}

func TestParseURLRefusesNonsense(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"memory", "scheme"},
		{"http://h:1/0", "scheme"},
		{"unix:///tmp/redis.sock", "scheme"},
		{"redis:h:1", "no host"},
		{"redis:///0", "no host"},
		{"redis://h:99999/0", "port"},
		{"redis://h:1/zero", "path"},
		{"redis://h:1/-1", "DB"},
		{"redis://h:1/0/1", "path"},
		{"redis://h:1/0#frag", "fragment"},
		{"redis://h:1/0?db=2", `"db"`},
		{"redis://h:1/0?prefix=", "prefix"},
		{"redis://h:1/0?prefix=%7Bx%7D", "prefix"},
		{"redis://h:1/0?pool_size=many", "pool_size"},
		{"redis://h:1/0?pool_size=-3", "PoolSize"},
		{"redis://h:1/0?read_timeout=soon", "read_timeout"},
		{"redis://h:1/0?dial_timeout=-1s", "DialTimeout"},
		{"redis://h:1/0?pool_size=1&pool_size=2", "2 times"},
		{"redis://h:1/0?a=%zz", "query"},
		{"redis://:pw@h\x7f:1/0", "parse"},
	} {
		_, err := redisstore.ParseURL(tt.url)
		assert.ErrorContains(t, err, tt.want, tt.url)
		if err != nil {
			assert.NotContains(t, err.Error(), "pw", "an error must not show the password")
		}
	}
}

// FuzzParseURL checks that whatever the command line gives, ParseURL does
// not panic, accepts only options that pass Validate, and never repeats a
// password in an error or in String.
func FuzzParseURL(f *testing.F) {
	for _, seed := range []string{
		"redis://localhost:6379/0",
		"rediss://user:secret@h:6380/2?prefix=p:&pool_size=3&read_timeout=1s",
		"redis://[::1]/",
		"redis://h:1/0?prefix={x}",
		"redis://:secret@h:0/-1?dial_timeout=-1s",
		"redis://h%zz:1",
		"memory",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		o, err := redisstore.ParseURL(raw)
		if err != nil {
			return
		}
		checked := o
		assert.NoError(t, checked.EnsureDefaults().Validate(), "ParseURL(%q) accepted invalid options", raw)
		assert.Equal(t, o, checked, "ParseURL(%q) left a field without its default", raw)
		if len(o.Password) >= 4 {
			assert.NotContains(t, o.String(), o.Password)
		}
	})
}

func TestNewFromURL(t *testing.T) {
	s, err := redisstore.NewFromURL("redis://:pw@db.example:6380/5?prefix=granary:blue:")
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "granary:blue:", s.KeyPrefix())
	assert.Equal(t, `redis://db.example:6380/5 (key prefix "granary:blue:", with password)`, s.String())
	_, err = redisstore.NewFromURL("redis://db.example:6380/x")
	assert.ErrorContains(t, err, "path")
}
