package subject

import (
	"log/slog"
	"time"
)

// Settings of the measured silos, as bench.md asks.
const (
	// HomeSilo is the name of the silo every measured grain lives on.
	HomeSilo = "silo-0"
	// FlushPeriod is the silos' snapshot period.
	FlushPeriod = 50 * time.Millisecond
)

var quiet = slog.New(slog.DiscardHandler)
