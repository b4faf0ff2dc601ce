package envoyratelimit

import (
	"errors"
	"fmt"
	"math/rand"
	"net"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/provider"
	"github.com/envoyproxy/ratelimit/src/redis"
	service "github.com/envoyproxy/ratelimit/src/service"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/envoyproxy/ratelimit/src/stats"
	"github.com/envoyproxy/ratelimit/src/utils"
	gostats "github.com/lyft/gostats"
	"google.golang.org/grpc"
)

// Reference is envoyproxy/ratelimit's rate limit service serving one
// configuration on a loopback gRPC port, counting in one redis-server.
type Reference struct {
	ln     net.Listener
	server *grpc.Server
	redis  redis.Client
	served chan struct{}
	once   sync.Once
}

// StartReference starts the reference service on a free loopback port:
// its limits are configYAML (one domain, its format), its counts in the
// redis-server at redisAddr (host:port). It returns once the port
// listens and the configuration is loaded.
func StartReference(redisAddr, configYAML string) (*Reference, error) {
	s := settings.NewSettings()
	s.RedisSocketType, s.RedisType, s.RedisUrl = "tcp", "SINGLE", redisAddr
	s.DisableStats, s.LocalCacheSizeInBytes = true, 0
	s.ExpirationJitterMaxSeconds = 0
	store := gostats.NewStore(gostats.NewNullSink(), false)
	statsManager := stats.NewStatManager(store, s)

	root, err := parseConfig(configYAML)
	if err != nil {
		return nil, err
	}
	loaded, err := loadConfig(root, statsManager)
	if err != nil {
		return nil, err
	}
	client := redis.NewClientImpl(store.Scope("redis_pool"), false, "", s.RedisSocketType, s.RedisType, s.RedisUrl, s.RedisPoolSize,
		s.RedisPipelineWindow, 0, nil, false, nil, s.RedisTimeout, "", "")
	cache := redis.NewFixedRateLimitCacheImpl(client, nil, utils.NewTimeSourceImpl(), rand.New(utils.NewLockedSource(1)),
		s.ExpirationJitterMaxSeconds, nil, s.NearLimitRatio, s.CacheKeyPrefix, statsManager, s.StopCacheKeyIncrementWhenOverlimit)
	events := make(chan provider.ConfigUpdateEvent, 1)
	events <- &staticConfig{config: loaded}
	// No health checker: the service reads it only to report the
	// configuration's health (healthyWithAtLeastOneConfigLoad, off here),
	// and building one takes over the process's SIGTERM.
	svc := service.NewService(cache, configProvider{events}, statsManager, nil, utils.NewTimeSourceImpl(), false, false, false)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	r := &Reference{ln: ln, server: grpc.NewServer(), redis: client, served: make(chan struct{})}
	rlsv3.RegisterRateLimitServiceServer(r.server, svc)
	go func() {
		defer close(r.served)
		_ = r.server.Serve(ln)
	}()
	return r, nil
}

// Addr is where the service listens, host:port.
func (r *Reference) Addr() string { return r.ln.Addr().String() }

// Stop ends the service and closes its Redis connections; calling it
// twice does nothing. The reference's own goroutine that waits for
// configuration updates has no stop and stays (see TestMain).
func (r *Reference) Stop() {
	r.once.Do(func() {
		r.server.Stop()
		<-r.served
		_ = r.redis.Close()
	})
}

// parseConfig reads a YAML configuration as the reference's file loader
// does, which panics on a bad file; the panic comes back as an error.
func parseConfig(yaml string) (root *config.YamlRoot, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("envoyratelimit: the reference refuses the configuration: %v", p)
		}
	}()
	return config.ConfigFileContentToYaml("config.yaml", yaml), nil
}

func loadConfig(root *config.YamlRoot, statsManager stats.Manager) (loaded config.RateLimitConfig, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("envoyratelimit: the reference refuses the configuration: %v", p)
		}
	}()
	loaded = config.NewRateLimitConfigImpl([]config.RateLimitConfigToLoad{{Name: "config.yaml", ConfigYaml: root}}, statsManager, false)
	if loaded.IsEmptyDomains() {
		return nil, errors.New("envoyratelimit: the configuration has no domain")
	}
	return loaded, nil
}

// configProvider hands the service its one configuration, as the file
// provider does after loading the runtime directory.
type configProvider struct {
	events chan provider.ConfigUpdateEvent
}

func (p configProvider) ConfigUpdateEvent() <-chan provider.ConfigUpdateEvent { return p.events }
func (p configProvider) Stop()                                                {}

type staticConfig struct{ config config.RateLimitConfig }

func (c *staticConfig) GetConfig() (config.RateLimitConfig, any) { return c.config, nil }
