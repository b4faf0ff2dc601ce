// Package contract holds what the rate-limiting grains and their holders
// must agree on beyond the generated messages: the metadata names and
// reason phrases, and the conversions between the limiter options and
// their wire messages.
package contract
