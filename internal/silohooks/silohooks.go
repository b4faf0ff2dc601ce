// Package silohooks gives the test kit (testcluster) what package silo
// offers no user: stopping a silo as a crash would. Package silo sets the
// hooks when it is initialised.
package silohooks

// Kill stops the silo s (a *silo.Silo) as a crash would: its membership
// and links die without a goodbye.
var Kill func(s any)
