// Command granary runs a silo: the rate-limiting grains (grains/ratelimit)
// and the example counter grain, a gateway for clients, and an HTTP port
// serving the rate-limit API, /healthz, /readyz, /cluster (the silos it
// sees, in JSON), /metrics (Prometheus text format) and /debug/pprof/. It
// prints where it listens and stops
// gracefully on Ctrl-C (SIGINT) or SIGTERM: /readyz fails, the HTTP port
// drains, then the silo stops.
//
//	go run ./cmd/granary [-config granary.yaml] [-gateway host:port] [-http host:port] [-name silo-name]
//
// Every flag has an environment variable (GRANARY_ and the flag's name in
// capitals, dashes as underscores: -silo-address is GRANARY_SILO_ADDRESS)
// and is a key of the config file's silo section under its own name. The
// command line wins, then the environment, then the file, then the
// built-in default. The file (-config or GRANARY_CONFIG, YAML or JSON)
// also holds the limiters' default options and named configurations. Every
// problem of the settings is reported at once, before anything starts.
//
// -store (GRANARY_STORE) chooses where grain state lives: memory, lost
// when the process exits, or Redis, shared by every silo pointed at the
// same server (see docs/persistence.md). The silo logs which store it uses
// at start, and refuses to start if Redis does not answer; a silo of a
// cluster on the memory store warns that state and limits reset when a
// silo dies or a grain moves.
//
// -expect-silos (GRANARY_EXPECT_SILOS) keeps /readyz at 503 while the silo
// sees fewer active silos, itself included.
//
// /dashboard/ is a read-only page of the cluster and this silo's grains,
// calls and limiters; the admin port's (-admin) adds the hottest limiter
// keys and /locate. Address settings may name environment variables
// (${POD_IP}:7946) or network interfaces (${interface:eth0}:7946), and
// seeds may be DNS names, resolved again while the silo runs.
//
//	granary ctl [-http URL] [-admin URL] [-o table|json] members | locate TYPE KEY | limiter stats|config|reset|delete|configure ...
//
// is the operator's command: it asks a running silo over those ports, or
// its gateway with a client token that has the admin right.
//
// docs/operations.md lists every setting and metric, explains /readyz, the
// dashboard and granary ctl, and runs a three-silo cluster on one machine.
package main
