package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/silo"
)

// Every flag has an environment variable that sets its default; a flag on
// the command line wins.

func envOr(env, def string) string {
	if v, ok := os.LookupEnv(env); ok {
		return v
	}
	return def
}

func stringFlag(fs *flag.FlagSet, p *string, name, env, def, usage string) {
	fs.StringVar(p, name, envOr(env, def), usage+" ($"+env+")")
}

func durationFlag(fs *flag.FlagSet, p *time.Duration, name, env string, def time.Duration, usage string) error {
	d := def
	if v, ok := os.LookupEnv(env); ok {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("$%s: %w", env, err)
		}
	}
	fs.DurationVar(p, name, d, usage+" ($"+env+")")
	return nil
}

// siloFlags are the silo's settings that come from flags.
type siloFlags struct {
	opts        silo.Options
	gateway     string
	seeds       string
	secretFile  string
	timings     string
	stopTimeout time.Duration
}

// defineSiloFlags defines the flags of the silo's own settings on fs.
func defineSiloFlags(fs *flag.FlagSet) (*siloFlags, error) {
	f := &siloFlags{}
	o := &f.opts
	stringFlag(fs, &o.Name, "name", "GRANARY_NAME", "", "silo name, unique in the cluster (default hostname-pid)")
	stringFlag(fs, &f.gateway, "gateway", "GRANARY_GATEWAY", silo.DefaultGatewayAddress, "where clients connect (host:port; port 0 picks one; none: no gateway)")
	stringFlag(fs, &o.Cluster.SiloAddress, "silo-address", "GRANARY_SILO_ADDRESS", "", "where other silos connect (host:port); setting it makes the silo join a cluster")
	stringFlag(fs, &o.Cluster.AdvertiseAddress, "advertise", "GRANARY_ADVERTISE", "", "the address other silos dial for -silo-address, when it differs (0.0.0.0, NAT)")
	stringFlag(fs, &o.Cluster.GossipAddress, "gossip", "GRANARY_GOSSIP", "127.0.0.1:7946", "where the silo gossips with the others (IP:port)")
	stringFlag(fs, &o.Cluster.AdvertiseGossipAddress, "advertise-gossip", "GRANARY_ADVERTISE_GOSSIP", "", "the gossip address other silos use, when it differs")
	stringFlag(fs, &f.seeds, "seeds", "GRANARY_SEEDS", "", "gossip addresses of silos to join, comma-separated (none: start a new cluster)")
	stringFlag(fs, &o.Security.ClusterID, "cluster-id", "GRANARY_CLUSTER_ID", silo.DefaultClusterID, "the cluster's name: silos and clients of another are refused")
	stringFlag(fs, &f.secretFile, "secret-file", "GRANARY_SECRET_FILE", "", "a file holding the cluster's secret (16 bytes or more), required of every silo and client")
	stringFlag(fs, &f.timings, "timings", "GRANARY_TIMINGS", "lan", "failure detection profile: lan, or fast (one machine, tests)")
	if err := durationFlag(fs, &f.stopTimeout, "stop-timeout", "GRANARY_STOP_TIMEOUT", 30*time.Second, "how long a graceful stop may take"); err != nil {
		return nil, err
	}
	return f, nil
}

// options turns the parsed flags into the silo's options.
func (f *siloFlags) options() (silo.Options, error) {
	o := f.opts
	if f.stopTimeout <= 0 {
		return o, fmt.Errorf("-stop-timeout must be positive, got %v", f.stopTimeout)
	}
	if f.gateway == "none" {
		o.DisableGateway = true
	} else {
		o.GatewayAddress = f.gateway
	}
	if f.secretFile != "" {
		secret, err := os.ReadFile(f.secretFile)
		if err != nil {
			return o, fmt.Errorf("-secret-file: %w", err)
		}
		o.Security.Secret = []byte(strings.TrimSpace(string(secret)))
	}
	if o.Cluster.SiloAddress == "" {
		if f.seeds != "" {
			return o, fmt.Errorf("-seeds needs -silo-address: a silo joins a cluster only with an address for other silos")
		}
		return o, nil
	}
	o.Cluster.Enabled = true
	for _, seed := range strings.Split(f.seeds, ",") {
		if seed = strings.TrimSpace(seed); seed != "" {
			o.Cluster.Seeds = append(o.Cluster.Seeds, seed)
		}
	}
	switch f.timings {
	case "lan":
		o.Cluster.Timings = cluster.LANTimings()
	case "fast":
		o.Cluster.Timings = cluster.FastTimings()
	default:
		return o, fmt.Errorf("-timings %q: want lan or fast", f.timings)
	}
	return o, nil
}
