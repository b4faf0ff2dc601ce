package peer

import (
	"context"
	"log/slog"
)

// quiet is the logger given to every peer library that logs:
// protoactor-go's default logger prints to stdout, where the table goes.
var quiet = slog.New(slog.DiscardHandler)

// unplaced is embedded by the workloads of peers whose calls have no
// placement to check and nothing to close.
type unplaced struct{}

func (unplaced) CheckPlacement(context.Context) (bool, error) { return false, nil }
func (unplaced) Close(context.Context) error                  { return nil }
