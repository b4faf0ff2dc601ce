package main

import (
	"context"
	"flag"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/internal/metrics"
	"github.com/granary-go/granary/silo"
)

const operationsDoc = "../../docs/operations.md"

// docs/operations.md lists every flag with its environment variable.
func TestOperationsDocListsEverySetting(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	s := newSettings(flag.NewFlagSet("t", flag.ContinueOnError))
	defineSiloFlags(s)
	for _, name := range append([]string{"config"}, s.names...) {
		env := "GRANARY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		assert.Contains(t, string(doc), "| `-"+name+"` | `"+env+"` |", "the settings table lists -%s", name)
	}
}

// docs/operations.md describes every metric the binary's /metrics shows,
// and no other: the names are taken from a real scrape.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	prom, err := newPrometheusMetrics()
	require.NoError(t, err)
	defer func() { _ = prom.provider.Shutdown(context.Background()) }()
	s, err := silo.New(silo.Options{Name: "doc", GatewayAddress: "127.0.0.1:0"}, silo.WithLogger(quietLog), silo.WithMeterProvider(prom.provider))
	require.NoError(t, err)
	require.NoError(t, counter.RegisterCounterGrain(s, counter.New))
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, s.Start(context.Background()))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	}()
	_, err = counter.NewCounterRef(s.Caller(), "k").Add(context.Background(), &counter.AddRequest{Delta: 1}) // a duration recorded
	require.NoError(t, err)

	code, body := get(t, prom.handler, "/metrics")
	require.Equal(t, http.StatusOK, code)
	var scraped []string
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (granary_\S+) `).FindAllStringSubmatch(body, -1) {
		scraped = append(scraped, m[1])
	}
	require.Len(t, scraped, len(metrics.Instruments()), "one Prometheus family per instrument")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(granary_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(scraped)
	slices.Sort(documented)
	assert.Equal(t, scraped, documented, "the metrics table of docs/operations.md")
}
