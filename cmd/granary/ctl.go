package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
	"github.com/granary-go/granary/proxy"
)

// ctlUsage is granary ctl's help.
const ctlUsage = `usage: granary ctl [flags] COMMAND [ARGS]

The operator's command: asks a running silo over its HTTP port (-http) and
its admin port (-admin), or its gateway (-gateway) with a client token.

Commands:
  members                                  the silos this silo sees (/cluster)
  locate GRAIN_TYPE KEY                    the silo that holds a grain (admin port)
  limiter stats ALGORITHM KEY              a limiter's statistics
  limiter config ALGORITHM KEY             a limiter's configuration
  limiter reset ALGORITHM KEY              give it its full quota back (admin)
  limiter delete ALGORITHM KEY             clear its state and options (admin)
  limiter configure ALGORITHM KEY CONFIG   apply a named configuration (admin port)

ALGORITHM is concurrency, fixed-window, sliding-window or token-bucket.
The admin operations need a client token with the admin right (-token-file).
They go to the admin port, which is sent the token's secret as
Authorization: Bearer; with -gateway, reset and delete go through the
gateway instead, as a client holding the token.
Exit status: 0 done, 1 failed, 2 bad usage.

Flags:
`

// ctlFlags are granary ctl's settings.
type ctlFlags struct {
	http, admin, gateway, clusterID, tokenFile, output string
	timeout                                            time.Duration
}

// errCtlUsage marks a bad command line: the usage is printed.
var errCtlUsage = errors.New("bad usage")

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("granary ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), ctlUsage)
		fs.PrintDefaults()
	}
	var f ctlFlags
	env := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	fs.StringVar(&f.http, "http", env("GRANARY_CTL_HTTP", "http://127.0.0.1:8080"), "the silo's HTTP port, as a URL ($GRANARY_CTL_HTTP)")
	fs.StringVar(&f.admin, "admin", env("GRANARY_CTL_ADMIN", "http://127.0.0.1:8081"), "the silo's admin port, as a URL ($GRANARY_CTL_ADMIN)")
	fs.StringVar(&f.gateway, "gateway", env("GRANARY_CTL_GATEWAY", ""), "a gateway (host:port) for reset and delete with -token-file ($GRANARY_CTL_GATEWAY)")
	fs.StringVar(&f.clusterID, "cluster-id", env("GRANARY_CTL_CLUSTER_ID", "granary"), "the cluster id the gateway expects ($GRANARY_CTL_CLUSTER_ID)")
	fs.StringVar(&f.tokenFile, "token-file", env("GRANARY_CTL_TOKEN_FILE", ""), "a file with the client token, name:rights:secret-in-hex as in -client-tokens-file ($GRANARY_CTL_TOKEN_FILE)")
	fs.StringVar(&f.output, "o", "table", "output: table or json")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long a command may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("ctl: -o %q: want table or json", f.output)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	out, err := f.do(ctx, fs.Args())
	if errors.Is(err, errCtlUsage) {
		fs.Usage()
		return fmt.Errorf("ctl: %w", err)
	}
	if err != nil {
		return fmt.Errorf("ctl: %w", err)
	}
	return out.write(stdout, f.output)
}

// ctlOutput is a command's answer: a value for -o json, a table for -o
// table.
type ctlOutput struct {
	value  any
	header []string
	rows   [][]string
}

func (o ctlOutput) write(w io.Writer, format string) error {
	if format == "json" {
		body, err := json.MarshalIndent(o.value, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", body)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(o.header) > 0 {
		fmt.Fprintln(tw, strings.Join(o.header, "\t"))
	}
	for _, r := range o.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func (f *ctlFlags) do(ctx context.Context, args []string) (ctlOutput, error) {
	if len(args) == 0 {
		return ctlOutput{}, fmt.Errorf("%w: no command", errCtlUsage)
	}
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "members" && len(rest) == 0:
		return f.members(ctx)
	case cmd == "locate" && len(rest) == 2:
		return f.locate(ctx, rest[0], rest[1])
	case cmd == "limiter" && len(rest) >= 3:
		alg, ok := algorithmNames[rest[1]]
		if !ok {
			return ctlOutput{}, fmt.Errorf("%w: algorithm %q", errCtlUsage, rest[1])
		}
		return f.limiter(ctx, rest[0], alg, rest[2], rest[3:])
	}
	return ctlOutput{}, fmt.Errorf("%w: %q", errCtlUsage, strings.Join(args, " "))
}

// algorithmNames are the algorithms as the command line names them.
var algorithmNames = map[string]apiv1.Algorithm{
	"concurrency":    apiv1.Algorithm_ALGORITHM_CONCURRENCY,
	"fixed-window":   apiv1.Algorithm_ALGORITHM_FIXED_WINDOW,
	"sliding-window": apiv1.Algorithm_ALGORITHM_SLIDING_WINDOW,
	"token-bucket":   apiv1.Algorithm_ALGORITHM_TOKEN_BUCKET,
}

func (f *ctlFlags) members(ctx context.Context) (ctlOutput, error) {
	var c clusterAnswer
	if err := ctlGet(ctx, f.http, "/cluster", &c); err != nil {
		return ctlOutput{}, err
	}
	out := ctlOutput{value: c, header: []string{"SILO", "STATE", "STATUS", "GENERATION", "LOAD", "SINCE", "SILO ADDRESS", "GATEWAY"}}
	for _, m := range c.Members {
		name := m.Name
		if name == c.Self {
			name += " *"
		}
		out.rows = append(out.rows, []string{name, m.State, m.Status, m.Generation, fmt.Sprint(m.Load), m.Since, m.SiloAddress, m.GatewayAddress})
	}
	return out, nil
}

func (f *ctlFlags) locate(ctx context.Context, grainType, key string) (ctlOutput, error) {
	var a locateAnswer
	if err := ctlGet(ctx, f.admin, "/locate?"+url.Values{"type": {grainType}, "key": {key}}.Encode(), &a); err != nil {
		return ctlOutput{}, err
	}
	silo := a.Silo
	if !a.Found {
		silo = "(no activation)"
	}
	return ctlOutput{value: a, header: []string{"GRAIN TYPE", "KEY", "SILO"}, rows: [][]string{{a.Type, a.Key, silo}}}, nil
}

func (f *ctlFlags) limiter(ctx context.Context, op string, alg apiv1.Algorithm, key string, rest []string) (ctlOutput, error) {
	api := func(base string) ratelimitv1connect.RateLimitServiceClient {
		return ratelimitv1connect.NewRateLimitServiceClient(http.DefaultClient, strings.TrimSuffix(base, "/"), connect.WithProtoJSON())
	}
	adminAPI := func() (ratelimitv1connect.RateLimitServiceClient, error) {
		token, err := f.token()
		if err != nil {
			return nil, err
		}
		bearer := "Bearer " + hex.EncodeToString(token.Secret)
		withToken := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", bearer)
				return next(ctx, req)
			}
		})
		return ratelimitv1connect.NewRateLimitServiceClient(http.DefaultClient, strings.TrimSuffix(f.admin, "/"),
			connect.WithProtoJSON(), connect.WithInterceptors(withToken)), nil
	}
	done := ctlOutput{value: map[string]string{"done": op, "key": key}, rows: [][]string{{op + ": done"}}}
	switch {
	case op == "stats" && len(rest) == 0:
		resp, err := api(f.http).Statistics(ctx, connect.NewRequest(&apiv1.StatisticsRequest{Algorithm: alg, Key: key}))
		if err != nil {
			return ctlOutput{}, err
		}
		st := resp.Msg
		return ctlOutput{value: protoValue(st),
			header: []string{"AVAILABLE", "QUEUED PERMITS", "SUCCEEDED", "FAILED", "ACTIVE LEASES", "WAITING CALLS"},
			rows: [][]string{{fmt.Sprint(st.GetAvailablePermits()), fmt.Sprint(st.GetQueuedPermits()), fmt.Sprint(st.GetTotalSuccessfulLeases()),
				fmt.Sprint(st.GetTotalFailedLeases()), fmt.Sprint(st.GetActiveLeases()), fmt.Sprint(st.GetWaitingCalls())}}}, nil
	case op == "config" && len(rest) == 0:
		resp, err := api(f.http).GetConfiguration(ctx, connect.NewRequest(&apiv1.GetConfigurationRequest{Algorithm: alg, Key: key}))
		if err != nil {
			return ctlOutput{}, err
		}
		text, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp.Msg.GetOptions())
		if err != nil {
			return ctlOutput{}, err
		}
		return ctlOutput{value: protoValue(resp.Msg.GetOptions()), rows: [][]string{{string(text)}}}, nil
	case (op == "reset" || op == "delete") && len(rest) == 0:
		if f.gateway != "" {
			return done, f.throughGateway(ctx, op, alg, key)
		}
		admin, err := adminAPI()
		if err != nil {
			return ctlOutput{}, err
		}
		if op == "reset" {
			_, err = admin.Reset(ctx, connect.NewRequest(&apiv1.ResetRequest{Algorithm: alg, Key: key}))
		} else {
			_, err = admin.DeleteState(ctx, connect.NewRequest(&apiv1.DeleteStateRequest{Algorithm: alg, Key: key}))
		}
		return done, err
	case op == "configure" && len(rest) == 1:
		admin, err := adminAPI()
		if err != nil {
			return ctlOutput{}, err
		}
		_, err = admin.Configure(ctx, connect.NewRequest(&apiv1.ConfigureRequest{Algorithm: alg, Key: key, Config: rest[0]}))
		return done, err
	}
	return ctlOutput{}, fmt.Errorf("%w: limiter %s", errCtlUsage, op)
}

// throughGateway resets or deletes a limiter as a client of the gateway,
// with the token of -token-file: the gateway refuses it unless the token
// has the admin right.
func (f *ctlFlags) throughGateway(ctx context.Context, op string, alg apiv1.Algorithm, key string) error {
	token, err := f.token()
	if err != nil {
		return err
	}
	c, err := client.New(client.Options{Gateways: []string{f.gateway}, ClusterID: f.clusterID, Token: token})
	if err != nil {
		return err
	}
	defer c.Close()
	l := limiterOf(c, alg, key)
	if op == "reset" {
		return l.Reset(ctx)
	}
	return l.DeleteState(ctx)
}

// token reads the client token of -token-file, which the admin operations
// need on every path.
func (f *ctlFlags) token() (*client.Token, error) {
	if f.tokenFile == "" {
		return nil, errors.New("the admin operations need -token-file: a client token with the admin right")
	}
	data, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return nil, err
	}
	tokens, err := parseClientTokens(f.tokenFile, data)
	if err != nil {
		return nil, err
	}
	if len(tokens) != 1 {
		return nil, fmt.Errorf("%s: want one token, found %d", f.tokenFile, len(tokens))
	}
	return &client.Token{Name: tokens[0].Name, Secret: tokens[0].Secret}, nil
}

func limiterOf(c proxy.Caller, alg apiv1.Algorithm, key string) ratelimit.Limiter {
	switch alg {
	case apiv1.Algorithm_ALGORITHM_CONCURRENCY:
		return ratelimit.Concurrency(c, key)
	case apiv1.Algorithm_ALGORITHM_SLIDING_WINDOW:
		return ratelimit.SlidingWindow(c, key)
	case apiv1.Algorithm_ALGORITHM_TOKEN_BUCKET:
		return ratelimit.TokenBucket(c, key)
	}
	return ratelimit.FixedWindow(c, key)
}

// protoValue is a message as -o json shows it: protojson's field names.
func protoValue(m proto.Message) json.RawMessage {
	body, _ := protojson.Marshal(m)
	return body
}

// ctlGet decodes the JSON answer of GET base+path into out.
func ctlGet(ctx context.Context, base, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}
