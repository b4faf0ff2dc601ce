package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
)

var prefixes atomic.Int64

// uniquePrefix returns a key prefix no other store of this test binary
// uses, so that stores on one server start empty.
func uniquePrefix() string { return fmt.Sprintf("test%d:", prefixes.Add(1)) }

// newStore returns a store on srv under a fresh prefix, closed at cleanup.
func newStore(t *testing.T, srv *redistest.Server, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	opts.Addr = srv.Addr()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = uniquePrefix()
	}
	s, err := redisstore.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var testKey = persistence.Key{GrainType: "counter", GrainKey: "k1", Name: "state"}

var bg = context.Background()

// replyDropper is a TCP proxy in front of Redis that, while dropping is
// set, lets commands through but throws their replies away and cuts the
// client's connection: the command ran, and the client cannot know.
type replyDropper struct {
	ln       net.Listener
	target   string
	dropping atomic.Bool
	wg       sync.WaitGroup
	mu       struct {
		sync.Mutex
		conns  []net.Conn
		closed bool
	}
}

func startReplyDropper(t *testing.T, target string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &replyDropper{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *replyDropper) Addr() string { return p.ln.Addr().String() }

func (p *replyDropper) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		_ = c.Close()
		return false
	}
	p.mu.conns = append(p.mu.conns, c)
	return true
}

func (p *replyDropper) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.wg.Go(func() {
			_, _ = io.Copy(server, client)
			_ = server.Close()
		})
		p.wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && p.dropping.Load() {
					break // Redis has answered, so the command ran
				}
				if n > 0 {
					if _, err := client.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = client.Close()
			_ = server.Close()
		})
	}
}

func (p *replyDropper) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.mu.closed = true
	for _, c := range p.mu.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
