package metrics

import (
	"io"

	"go.opentelemetry.io/otel/metric"
)

// Attach is set by package silo (nil in a program without it). It hands
// register to r when r is a silo with a meter provider: the silo calls it
// at once with its provider and name, and closes what it returns when the
// silo stops. It reports false, without calling register, when r is not
// such a silo (or has stopped). Libraries that add grains to a silo
// (grains/ratelimit) report their instruments this way, beside the silo's
// own, without a hook in the public API.
var Attach func(r any, register func(mp metric.MeterProvider, silo string) (io.Closer, error)) (bool, error)
