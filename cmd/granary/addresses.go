package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// expandAddresses replaces $NAME and ${NAME} in the address settings
// with the environment's values, so that one config file serves every
// silo whose own address comes from the environment: a Kubernetes pod's
// POD_IP, say (gossip: ${POD_IP}:7946). A variable that is not set is an
// error, not an empty host that would bind every interface.
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
