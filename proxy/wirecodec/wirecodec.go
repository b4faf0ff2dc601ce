package wirecodec

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Most varints in small messages, tags and lengths included, take one
// byte. The functions below handle that case themselves, inlined into the
// caller, and leave the rest to protowire, saving its call and switch.

// AppendVarint appends v to b as a varint, as protowire.AppendVarint does.
func AppendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// ConsumeVarint parses a varint at the start of b, as
// protowire.ConsumeVarint does: it returns the value and the number of
// bytes read, or a negative length if b does not start with a valid varint.
func ConsumeVarint(b []byte) (v uint64, n int) {
	// A loop that looks at the first byte only, rather than a length check
	// and an index, keeps this function within the compiler's inlining
	// budget.
	for _, c := range b {
		if c < 0x80 {
			return uint64(c), 1
		}
		//lint:ignore SA4004 the loop only reads b[0], if there is one; see above.
		break
	}
	v, n = protowire.ConsumeVarint(b)
	return
}

// ConsumeUnknown keeps a field the codec does not decode, as protobuf
// does: given the tag already read and the rest of the input b, it checks
// the field number, parses the field's value, and appends the field to
// unknown. It returns the grown unknown fields and the number of bytes of b
// read, or unknown unchanged and a negative length if the field is
// malformed. A known field number with an unexpected wire type is kept the
// same way.
func ConsumeUnknown(unknown []byte, tag uint64, b []byte) ([]byte, int) {
	if tag>>3 == 0 || tag>>3 > uint64(protowire.MaxValidNumber) {
		return unknown, -1
	}
	num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return unknown, n
	}
	// protobuf re-encodes the tag, so a padded one comes out minimal.
	return append(protowire.AppendTag(unknown, num, typ), b[:n]...), n
}

// InvalidError returns the error for malformed input to a message of the
// named type. Like protobuf's own, it matches proto.Error.
func InvalidError(message protoreflect.FullName) error {
	return fmt.Errorf("%w: %s: cannot parse invalid wire-format data", proto.Error, message)
}

// DepthError returns the error for input to a message of the named type
// that nests messages deeper than the recursion limit. It matches
// proto.Error.
func DepthError(message protoreflect.FullName) error {
	return fmt.Errorf("%w: %s: exceeded maximum recursion depth", proto.Error, message)
}

// UTF8Error returns the error for a string field, named in full, whose
// value to encode or decode is not valid UTF-8. It matches proto.Error.
func UTF8Error(field protoreflect.FullName) error {
	return fmt.Errorf("%w: field %s contains invalid UTF-8", proto.Error, field)
}
