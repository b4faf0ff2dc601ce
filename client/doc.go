// Package client reaches grains from outside the cluster: a Client holds
// one connection to a gateway silo, over which it sends calls and receives
// their replies and cancels. It never listens: nothing dials back.
//
//	c, err := client.New(client.Options{Gateways: []string{"127.0.0.1:30000"}})
//	if err != nil { ... }
//	defer c.Close()
//	if err := c.Connect(ctx); err != nil { ... } // optional: the first call connects too
//	counter := counter.NewCounterRef(c, "visits")
//	reply, err := counter.Add(ctx, &counter.AddRequest{Delta: 1})
//
// New does no I/O. Connect dials a gateway; a call on a client that is not
// connected (never was, or lost its connection) dials first, so a client
// connects lazily unless Connect is called. Given several gateways, a
// client starts at a random one, so that clients spread over them, and
// moves to the next when one cannot be reached or its connection drops. A
// call that was in flight on a connection that dropped fails with
// proxy.ErrUnavailable and is never repeated, since the grain may have run
// it; a call that could not even be sent is sent again on the new
// connection. A call that dials does so within its own response timeout
// (and within DialTimeout per gateway), and is sent with the time that
// remains; calls that wait for another call's dial wait within theirs.
//
// A program that imports only this package, generated references and the
// limiter holders of grains/ratelimit links none of the server: no
// activation host, gossip, directory or metrics SDK (docs/architecture.md
// gives the counts).
package client
