package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// interfacePrefix names a network interface in an address setting:
// ${interface:eth0}.
const interfacePrefix = "interface:"

// expandAddresses replaces $NAME and ${NAME} in the address settings
// with the environment's values, so that one config file serves every
// silo whose own address comes from the environment: a Kubernetes pod's
// POD_IP, say (gossip: ${POD_IP}:7946). ${interface:NAME} is the address
// of that network interface instead (see interfaceAddress). A variable
// that is not set, or an interface without an address, is an error, not
// an empty host that would bind every interface.
func (f *siloFlags) expandAddresses() error {
	c := &f.opts.Cluster
	var errs []error
	for _, s := range []struct {
		flag  string
		value *string
	}{
		{"-silo-address", &c.SiloAddress},
		{"-advertise", &c.AdvertiseAddress},
		{"-gossip", &c.GossipAddress},
		{"-advertise-gossip", &c.AdvertiseGossipAddress},
		{"-gateway", &f.gateway},
		{"-seeds", &f.seeds},
		{"-http", &f.http},
		{"-admin", &f.admin},
	} {
		if !strings.Contains(*s.value, "$") {
			continue
		}
		var missing []string
		expanded := os.Expand(*s.value, func(name string) string {
			if iface, ok := strings.CutPrefix(name, interfacePrefix); ok {
				v, err := interfaceAddress(iface)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s %q: %w", s.flag, *s.value, err))
				}
				return v
			}
			v, ok := os.LookupEnv(name)
			if !ok || v == "" {
				missing = append(missing, "$"+name)
			}
			return v
		})
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s not set in the environment", s.flag, *s.value, strings.Join(missing, ", ")))
			continue
		}
		*s.value = expanded
	}
	return errors.Join(errs...)
}

// interfaceAddress is the address of the named network interface for a
// host:port setting: its first IPv4 address, or else its first IPv6
// address that is not link-local, in brackets ([2001:db8::1]).
// Link-local addresses are left out: they need a zone, and other hosts
// reach them only on the same link.
func interfaceAddress(name string) (string, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("interface %q: %w", name, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", fmt.Errorf("interface %q: %w", name, err)
	}
	var v6 netip.Addr
	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := prefix.Addr()
		switch {
		case ip.Is4():
			return ip.String(), nil
		case !v6.IsValid() && !ip.IsLinkLocalUnicast():
			v6 = ip
		}
	}
	if v6.IsValid() {
		return "[" + v6.String() + "]", nil
	}
	return "", fmt.Errorf("interface %q has no address to use", name)
}
