package actor

import (
	"context"
	"time"

	"github.com/granary-go/granary/internal/turn"
)

// Budget returns the budget the caller gave this call: the time a bounded
// method may take, measured from when it starts. ok is false for calls
// without a budget (unbounded methods). It reads no clock.
func Budget(ctx context.Context) (budget time.Duration, ok bool) {
	if info := turn.Of(ctx); info != nil {
		return info.CallBudget()
	}
	return 0, false
}

// Deadline returns when the call's budget runs out: the budget measured
// from the first time the method asks for it (this call, or Context.Defer),
// which for a method that asks as it begins is its start. ok is false for
// calls without a budget.
func Deadline(ctx context.Context) (deadline time.Time, ok bool) {
	if info := turn.Of(ctx); info != nil {
		return info.BudgetDeadline()
	}
	return time.Time{}, false
}
