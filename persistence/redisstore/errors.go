package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/granary-go/granary/persistence"
)

// Errors of the Store, besides the persistence package's ErrNotFound,
// *ConflictError and ErrClosed, which it returns as the Store contract says.
var (
	// ErrUnavailable means Redis did not answer: it could not be reached,
	// the connection broke or timed out, every pooled connection was busy,
	// or the server said it cannot serve now (loading its data, a replica,
	// a cluster without a majority). The call may be retried; the flusher
	// does, every period, keeping the state dirty meanwhile.
	ErrUnavailable = errors.New("redisstore: redis unavailable")
	// ErrRejected means Redis answered the command with an error that a
	// retry will not cure: a wrong password, a missing permission, out of
	// memory.
	ErrRejected = errors.New("redisstore: redis rejected the command")
	// ErrCorrupt means a key the store owns holds something it did not
	// write: another program uses the same key prefix.
	ErrCorrupt = errors.New("redisstore: stored value is not grain state")
)

// outcome says what a failed call may have done in Redis.
type outcome int

const (
	// notApplied: the command never reached Redis, or Redis refused it
	// before running it.
	notApplied outcome = iota
	// inDoubt: the command may have run; its reply was lost.
	inDoubt
)

// failure turns an error of go-redis into one of the store's, saying what
// the call was about ("write counter/k/state"), and reports whether the
// command may have run.
func failure(ctx context.Context, what string, err error) (error, outcome) {
	var opErr *net.OpError
	var redisErr redis.Error
	switch {
	case errors.Is(err, redis.ErrClosed):
		return fmt.Errorf("redisstore: %s: %w (%w)", what, persistence.ErrClosed, err), notApplied
	case errors.As(err, &opErr) && opErr.Op == "dial",
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		// No connection, so nothing was sent.
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err), notApplied
	case contextEnded(ctx) != nil:
		return fmt.Errorf("redisstore: %s: %w (%v)", what, contextEnded(ctx), err), inDoubt
	case errors.As(err, &redisErr):
		switch {
		case redis.HasErrorPrefix(err, "WRONGTYPE"):
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err), notApplied
		case redis.IsLoadingError(err), redis.IsReadOnlyError(err), redis.IsClusterDownError(err),
			redis.IsTryAgainError(err), redis.IsMasterDownError(err), redis.IsMaxClientsError(err),
			redis.HasErrorPrefix(err, "BUSY"):
			return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err), notApplied
		}
		return fmt.Errorf("%w: %s: %w", ErrRejected, what, err), notApplied
	}
	// A broken connection or a timeout after the command was sent.
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err), inDoubt
}

// contextEnded returns ctx's error, or context.DeadlineExceeded once its
// deadline has passed even if its timer has not fired yet: go-redis sets
// the socket deadline from ctx's, and the socket can time out a moment
// before ctx reports it.
func contextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
