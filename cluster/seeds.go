package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// SRVSeedPrefix marks a seed given as a DNS SRV name, such as
// "dnssrv+_gossip._tcp.granary-gossip.default.svc.cluster.local": each
// record of the name gives a target and a port, and every A and AAAA
// record of the target is a gossip address. The prefix is the one
// Thanos and Cortex use for the same thing.
const SRVSeedPrefix = "dnssrv+"

// maxSeedAddresses bounds the gossip addresses one resolution of the
// seeds yields, so that a DNS answer cannot make the silo dial without
// end; past it, the rest of the answer is ignored.
const maxSeedAddresses = 256

// seedResolver turns Options.Seeds into gossip addresses, again at every
// round of dialling: a seed given by name follows its DNS answers, so
// that silos whose seeds all restarted at new addresses find them.
type seedResolver struct {
	seeds    []string
	resolver *net.Resolver
}

// resolvedSeeds is one resolution of the seeds.
type resolvedSeeds struct {
	// hosts are the addresses (IP:port) of each host the seeds name, in
	// the order of the seeds: a name's A and AAAA records are one host, an
	// SRV record's target is one, an IP:port seed is one. Each address
	// appears once.
	hosts [][]string
	// unresolved are the seeds that gave no address this time.
	unresolved []string
	// err is the last lookup error, for the log.
	err error
}

// resolve looks the seeds up. An IP:port seed costs nothing; a name is
// looked up each time (the resolver's cache, if any, is the DNS
// server's).
func (r *seedResolver) resolve(ctx context.Context) resolvedSeeds {
	var out resolvedSeeds
	seen := map[string]bool{}
	var host []string
	add := func(ip netip.Addr, port uint16) {
		a := netip.AddrPortFrom(ip.Unmap(), port).String()
		if !seen[a] && len(seen) < maxSeedAddresses {
			seen[a] = true
			host = append(host, a)
		}
	}
	endHost := func() {
		if len(host) > 0 {
			out.hosts = append(out.hosts, host)
			host = nil
		}
	}
	for _, seed := range r.seeds {
		n := len(out.hosts)
		if err := r.resolveOne(ctx, seed, add, endHost); err != nil {
			out.err = err
		}
		if len(out.hosts) == n && !r.repeats(seed, seen) {
			out.unresolved = append(out.unresolved, seed)
		}
	}
	return out
}

// repeats reports whether seed is an IP:port already in seen: a seed
// given twice, not one that failed to resolve.
func (r *seedResolver) repeats(seed string, seen map[string]bool) bool {
	ap, err := netip.ParseAddrPort(seed)
	return err == nil && seen[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()]
}

func (r *seedResolver) resolveOne(ctx context.Context, seed string, add func(netip.Addr, uint16), endHost func()) error {
	if name, ok := strings.CutPrefix(seed, SRVSeedPrefix); ok {
		// net returns the valid records beside an error about the others.
		_, records, err := r.resolver.LookupSRV(ctx, "", "", name)
		for _, rec := range records {
			if lookupErr := r.lookupHost(ctx, strings.TrimSuffix(rec.Target, "."), rec.Port, add); lookupErr != nil {
				err = lookupErr
			}
			endHost()
		}
		if err != nil {
			return fmt.Errorf("seed %s: %w", seed, err)
		}
		return nil
	}
	defer endHost()
	host, portText, err := net.SplitHostPort(seed)
	if err != nil {
		return fmt.Errorf("seed %s: %w", seed, err) // Validate refuses it
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return fmt.Errorf("seed %s: %w", seed, err)
	}
	if err := r.lookupHost(ctx, host, uint16(port), add); err != nil {
		return fmt.Errorf("seed %s: %w", seed, err)
	}
	return nil
}

// lookupHost adds host's addresses (A and AAAA records, or host itself
// when it is an IP) with port.
func (r *seedResolver) lookupHost(ctx context.Context, host string, port uint16, add func(netip.Addr, uint16)) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		add(ip, port)
		return nil
	}
	ips, err := r.resolver.LookupNetIP(ctx, "ip", host)
	for _, ip := range ips {
		add(ip, port)
	}
	return err
}

// checkSeed checks one of Options.Seeds: host:port, or SRVSeedPrefix and
// a DNS name.
func checkSeed(seed string) error {
	name, ok := strings.CutPrefix(seed, SRVSeedPrefix)
	if !ok {
		return checkAddress(seed, 1)
	}
	switch {
	case name == "":
		return errors.New("an SRV seed needs a name after " + SRVSeedPrefix)
	case len(name) > 253:
		return fmt.Errorf("the SRV name is %d bytes, more than DNS's 253", len(name))
	case strings.ContainsAny(name, ":/ "):
		return fmt.Errorf("%q: an SRV name has no port (its records give them)", seed)
	}
	return nil
}
