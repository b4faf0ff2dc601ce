// Package ratelog throttles log lines that someone outside the process can
// cause, such as a peer refused at a network edge, so that no peer can flood
// the log however fast it misbehaves.
//
// A Logger lets lines through as a token bucket allows (a burst, then one line
// per interval) and drops the rest. It counts what it drops, and the next line
// it lets through carries that count as the attribute "suppressed", so the log
// still says how much happened. Time comes from a clock.Clock, so tests decide
// when tokens come back.
package ratelog
