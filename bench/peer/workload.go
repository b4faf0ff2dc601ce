package peer

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// quiet is the logger given to every peer library that logs:
// protoactor-go's default logger prints to stdout, where the table goes.
var quiet = slog.New(slog.DiscardHandler)

// unplaced is embedded by the workloads of peers whose calls have no
// placement to check and nothing to close.
type unplaced struct{}

func (unplaced) CheckPlacement(context.Context) (bool, error) { return false, nil }
func (unplaced) Close(context.Context) error                  { return nil }

// errGaveUp ends a poll at once: what it waits for will never come.
var errGaveUp = errors.New("peer: gave up")

// poll calls try every 20 ms until it returns nil, returns an error
// wrapping errGaveUp, or timeout passes or ctx ends; it then returns
// try's last error.
func poll(ctx context.Context, timeout time.Duration, try func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := try(ctx)
		if err == nil || errors.Is(err, errGaveUp) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-tick.C:
		}
	}
}
