// Package wirecodec holds the small pieces of protobuf wire encoding that
// the codecs granarygen writes into _wire.pb.go files share: varints and
// length-prefixed values with a fast path for the common one-byte case,
// keeping unknown fields, and the errors a malformed input gets.
//
// The generated code calls these functions instead of repeating their
// bodies for every field and message. The hot ones are small enough for the
// Go compiler to inline, so that a call costs what the repeated block did;
// their slow paths are protowire's own functions.
//
// It is a leaf package, importing only the standard library and protobuf,
// so that generated code can depend on it without depending on the rest
// of granary. Its API serves generated code and may change with
// granarygen: other code should use protowire.
package wirecodec
