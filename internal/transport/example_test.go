package transport_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/granary-go/granary/internal/transport"
)

// text is a Marshaler for a string body.
type text string

func (t text) AppendTo(b []byte) ([]byte, error) { return append(b, t...), nil }

// upper answers each frame with its body in upper case.
type upper struct{}

func (upper) HandleFrame(c *transport.Conn, body []byte) {
	for i, ch := range body {
		if 'a' <= ch && ch <= 'z' {
			body[i] = ch - 'a' + 'A' // the body is the handler's to change
		}
	}
	_ = c.Send(text(body))
}

func (upper) HandleClose(*transport.Conn, error) {}

// printer prints each frame and reports it on a channel.
type printer chan struct{}

func (p printer) HandleFrame(_ *transport.Conn, body []byte) {
	fmt.Println(string(body))
	p <- struct{}{}
}

func (p printer) HandleClose(_ *transport.Conn, err error) { fmt.Println("closed:", err) }

func Example() {
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(*transport.Conn) transport.Handler {
		return upper{} // the handler is in place before the first frame is read
	})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	replies := make(printer, 1)
	c, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{}, replies)
	if err != nil {
		panic(err)
	}
	if err := c.Send(text("hello")); err != nil {
		panic(err)
	}
	<-replies
	c.Close()
	// Output:
	// HELLO
	// closed: <nil>
}

// Two ends of one cluster that share a secret: each learns who the other is,
// and a dialler without the secret is refused with a reason it can test.
func Example_clusterSecret() {
	secret := []byte("an example secret; use 32 random bytes") // both ends know it, the wire never sees it
	peers := make(chan transport.Identity, 1)
	l, err := transport.Listen("127.0.0.1:0", transport.Options{
		Identity:      transport.Identity{SiloID: "silo-1", Generation: 1, ClusterID: "prod"},
		ClusterSecret: secret,
	}, func(c *transport.Conn) transport.Handler {
		peers <- c.Peer() // who dialled, known before the first frame
		return upper{}
	}, transport.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	c, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{
		Identity:      transport.Identity{Role: transport.RoleSilo, SiloID: "silo-2", ClusterID: "prod"},
		ClusterSecret: secret,
	}, make(printer, 1))
	if err != nil {
		panic(err)
	}
	fmt.Println("dialled", c.Peer().SiloID, "and was accepted as", (<-peers).SiloID)
	c.Close()

	_, err = transport.Dial(context.Background(), l.Addr().String(), transport.Options{
		Identity: transport.Identity{ClusterID: "prod"},
	}, make(printer, 1))
	fmt.Println(errors.Is(err, transport.ErrSecretMismatch))
	// Output:
	// dialled silo-1 and was accepted as silo-2
	// closed: <nil>
	// true
}
