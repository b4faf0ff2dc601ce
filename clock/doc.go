// Package clock gives components time as an input: a Clock reads the time and
// schedules callbacks, the real clock wraps package time, and Fake lets tests
// move time by hand so that nothing waits on the wall clock.
package clock
