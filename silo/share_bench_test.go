package silo_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// BenchmarkShareUnderFlood measures what a flood of new activations on one
// connection leaves a sequential client on another: the sequential
// client's call rate alone and while the flood runs, in alternating slices
// (the machine's speed drifts, and slices taken turn about see the same
// drift), and their ratio, the share it kept. The flood is floodWorkers
// callers on one client connection, each calling a grain never called
// before and, when refused with OVERLOADED, calling the next one at once:
// the worst a flooder can do that still waits for its answers.
func BenchmarkShareUnderFlood(b *testing.B) { benchShareUnderFlood(b, 1) }

// BenchmarkShareUnderFloodOfOneTokensConnections is the same flood spread
// over floodConns connections that prove one client token, beside a
// sequential client with a token of its own: the shares count the token's
// connections as one client, so opening more of them must win the flood
// nothing.
func BenchmarkShareUnderFloodOfOneTokensConnections(b *testing.B) {
	benchShareUnderFlood(b, floodConns)
}

const floodConns = 16

var (
	floodToken      = client.Token{Name: "flood", Secret: []byte("the flooding client's token, 32b")}
	sequentialToken = client.Token{Name: "sequential", Secret: []byte("the sequential client's token32b")}
)

func benchShareUnderFlood(b *testing.B, conns int) {
	const (
		slice        = 1000
		floodWorkers = 512
	)
	opts := silo.Options{GatewayAddress: "127.0.0.1:0", Name: "bench", CollectionAge: 2 * time.Second}
	var seqToken *client.Token
	if conns > 1 {
		seqToken = &sequentialToken
		opts.Security.ClientTokens = []silo.ClientToken{{Name: floodToken.Name, Secret: floodToken.Secret},
			{Name: sequentialToken.Name, Secret: sequentialToken.Secret}}
	}
	s, err := silo.New(opts, silo.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	if err := testgrain.RegisterCounterGrain(s, testgrain.New(nil)); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	seq, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}, Token: seqToken}, client.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = seq.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	ctx, in := context.Background(), &testgrain.AddRequest{Delta: 1}
	ref := testgrain.NewCounterRef(seq, "sequential")
	sequential := func(n int) time.Duration {
		start := time.Now()
		for range n {
			if _, err := ref.Add(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	flood := startFlooder(b, s.GatewayAddr().String(), floodWorkers, conns)
	sequential(slice) // warm up
	b.ReportAllocs()
	b.ResetTimer()
	var solo, flooded time.Duration
	calls := 0
	for calls < b.N {
		n := min(slice, b.N-calls)
		solo += sequential(n)
		flood.resume()
		flooded += sequential(n)
		flood.pause()
		calls += n
	}
	b.StopTimer()
	ok, overloaded := flood.stop()
	b.ReportMetric(float64(calls)/solo.Seconds(), "solo-calls/s")
	b.ReportMetric(float64(calls)/flooded.Seconds(), "flooded-calls/s")
	b.ReportMetric(solo.Seconds()/flooded.Seconds(), "share")
	b.ReportMetric(float64(ok)/flooded.Seconds(), "flood-ok/s")
	b.ReportMetric(float64(overloaded)/flooded.Seconds(), "flood-overloaded/s")
}

// flooder is a process of its own (this test binary, running
// TestFlooderProcess) that floods a gateway with new activations while it
// is resumed: a flooder on another machine would not share the benchmark
// process's scheduler, and one in it would measure its own refusals.
type flooder struct {
	b   *testing.B
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startFlooder starts a flooder of workers callers on conns connections;
// more than one prove floodToken.
func startFlooder(b *testing.B, addr string, workers, conns int) *flooder {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFlooderProcess$")
	cmd.Env = append(os.Environ(), "GRANARY_FLOOD_GATEWAY="+addr, fmt.Sprint("GRANARY_FLOOD_WORKERS=", workers),
		fmt.Sprint("GRANARY_FLOOD_CONNS=", conns))
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &flooder{b: b, cmd: cmd, in: in, out: bufio.NewReader(out)}
	b.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
	})
	f.command('p') // connected and paused
	return f
}

// command sends c and waits for the flooder's answer line.
func (f *flooder) command(c byte) string {
	if _, err := f.in.Write([]byte{c, '\n'}); err != nil {
		f.b.Fatal(err)
	}
	line, err := f.out.ReadString('\n')
	if err != nil {
		f.b.Fatalf("flooder: %v", err)
	}
	if strings.HasPrefix(line, "error") {
		f.b.Fatalf("flooder: %s", line)
	}
	return strings.TrimSpace(line)
}

func (f *flooder) resume() { f.command('r') }
func (f *flooder) pause()  { f.command('p') }

// stop returns the flood's calls answered and refused with OVERLOADED.
func (f *flooder) stop() (ok, overloaded int64) {
	if _, err := fmt.Sscan(f.command('s'), &ok, &overloaded); err != nil {
		f.b.Fatal(err)
	}
	return ok, overloaded
}

// TestFlooderProcess is BenchmarkShareUnderFlood's flooder; it runs only
// as the process the benchmark starts. It reads one command a line on
// stdin (r: resume, p: pause, s: print the counts) and answers each with
// a line.
func TestFlooderProcess(t *testing.T) {
	addr := os.Getenv("GRANARY_FLOOD_GATEWAY")
	if addr == "" {
		t.Skip("the flooder of BenchmarkShareUnderFlood, which starts it")
	}
	var workers, conns int
	fmt.Sscan(os.Getenv("GRANARY_FLOOD_WORKERS"), &workers)
	fmt.Sscan(os.Getenv("GRANARY_FLOOD_CONNS"), &conns)
	var token *client.Token
	if conns > 1 {
		token = &floodToken
	}
	clients := make([]*client.Client, max(1, conns))
	for i := range clients {
		c, err := client.New(client.Options{Gateways: []string{addr}, Token: token}, client.WithLogger(quiet))
		if err != nil {
			fmt.Println("error", err)
			return
		}
		defer c.Close()
		clients[i] = c
	}
	var ok, overloaded atomic.Int64
	var failed atomic.Pointer[error]
	var next atomic.Int64
	var mu sync.Mutex
	running := sync.NewCond(&mu)
	paused, done := true, false
	ctx, in := context.Background(), &testgrain.AddRequest{Delta: 1}
	var wg sync.WaitGroup
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				for paused && !done {
					running.Wait()
				}
				mu.Unlock()
				if done {
					return
				}
				_, err := testgrain.NewCounterRef(c, fmt.Sprint("flood-", next.Add(1))).Add(ctx, in)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, proxy.ErrOverloaded):
					overloaded.Add(1)
				default:
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	set := func(p, d bool) {
		mu.Lock()
		paused, done = p, d
		mu.Unlock()
		running.Broadcast()
	}
	defer func() {
		set(true, true)
		wg.Wait()
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if p := failed.Load(); p != nil {
			fmt.Println("error", *p)
			return
		}
		switch sc.Text() {
		case "r":
			set(false, false)
			fmt.Println("resumed")
		case "p":
			set(true, false)
			fmt.Println("paused")
		case "s":
			fmt.Println(ok.Load(), overloaded.Load())
		}
	}
}
