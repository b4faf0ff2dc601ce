// Package cancel is the server side of push cancellation: per connection
// (or per local caller), the call ids of cancellable calls in progress map
// to fresh, never-reused contexts (Registry). A cancel for a call in
// progress cancels its context; one that overtook its request is
// remembered for a bounded time and number; one after the call finished
// is a no-op.
package cancel
