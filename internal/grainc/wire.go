package grainc

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/gofeaturespb"
)

// This file generates the _wire.pb.go files: for each message whose fields
// all have a known, fixed wire behaviour, plain Go code that encodes and
// decodes it exactly as protobuf-go's table-driven codec does (see
// proxy.WireMessage). Anything the generator is unsure of gets no codec,
// and the runtime falls back to proto.
//
// The generated files declare methods only, nothing at package level, so
// that any number of them can share a Go package without clashing.

// wireFileSuffix ends the name of the file holding a proto file's codecs.
const wireFileSuffix = "_wire.pb.go"

// Import paths of the packages generated codecs use, besides protoPackage.
// wirecodec holds the blocks every codec would otherwise repeat.
const (
	binaryPackage    = protogen.GoImportPath("encoding/binary")
	mathPackage      = protogen.GoImportPath("math")
	slicesPackage    = protogen.GoImportPath("slices")
	utf8Package      = protogen.GoImportPath("unicode/utf8")
	protowirePackage = protogen.GoImportPath("google.golang.org/protobuf/encoding/protowire")
	wirecodecPackage = protogen.GoImportPath("github.com/granary-go/granary/proxy/wirecodec")
)

// Names of the generated codec methods. The exported pair is what
// proxy.WireMessage declares; the unexported one carries the recursion
// depth between nested messages of one package.
const (
	appendMethod     = "AppendGranaryWire"
	mergeMethod      = "MergeGranaryWire"
	mergeDepthMethod = "mergeGranaryWire"
)

// wireCodecs returns the full names of the messages, among the files being
// generated, that get a codec.
func wireCodecs(gen *protogen.Plugin) map[protoreflect.FullName]bool {
	codecs := make(map[protoreflect.FullName]bool)
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		for _, m := range allMessages(f.Messages) {
			if hasWireCodec(f, m) {
				codecs[m.Desc.FullName()] = true
			}
		}
	}
	return codecs
}

// allMessages lists messages and their nested messages, depth first, in
// declaration order.
func allMessages(messages []*protogen.Message) []*protogen.Message {
	var out []*protogen.Message
	for _, m := range messages {
		out = append(out, m)
		out = append(out, allMessages(m.Messages)...)
	}
	return out
}

// hasWireCodec reports whether the generator can write a codec for m that
// behaves exactly as protobuf's: proto3, the open struct API, and only
// fields whose encoding does not depend on presence, oneofs, maps or
// initialization checks.
func hasWireCodec(f *protogen.File, m *protogen.Message) bool {
	if f.Desc.Syntax() != protoreflect.Proto3 || m.APILevel != gofeaturespb.GoFeatures_API_OPEN ||
		m.Desc.IsMapEntry() || len(m.Oneofs) > 0 || m.Desc.ExtensionRanges().Len() > 0 {
		return false
	}
	for _, field := range m.Fields {
		if !wireSupportsField(field) || shadowedType(f, field) {
			return false
		}
	}
	return true
}

// wireLocals are the identifiers the generated methods declare: receiver,
// parameters and locals.
var wireLocals = map[string]bool{
	"b": true, "m": true, "depth": true, "tag": true, "n": true, "x": true, "v": true, "e": true,
	"c": true, "num": true, "typ": true, "start": true, "err": true, "extra": true, "count": true,
}

// shadowedType reports whether the codec would name the type of field
// through a package whose name one of its own identifiers hides, as
// "m.M" when the import path ends in /m. protogen names an imported
// package after the last element of its path.
func shadowedType(f *protogen.File, field *protogen.Field) bool {
	var ident protogen.GoIdent
	switch {
	case field.Message != nil:
		ident = field.Message.GoIdent
	case field.Enum != nil:
		ident = field.Enum.GoIdent
	default:
		return false
	}
	return ident.GoImportPath != f.GoImportPath && wireLocals[path.Base(string(ident.GoImportPath))]
}

func wireSupportsField(field *protogen.Field) bool {
	fd := field.Desc
	if field.GoName == appendMethod || field.GoName == mergeMethod {
		return false // a field and a method cannot share a name
	}
	if fd.IsMap() || fd.IsExtension() || fd.ContainingOneof() != nil || fd.Kind() == protoreflect.GroupKind {
		return false
	}
	if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok {
		if opts.GetLazy() || opts.GetUnverifiedLazy() || isWeak(opts) {
			return false
		}
	}
	switch fd.Kind() {
	case protoreflect.MessageKind:
		// A message field reaching a type with required fields would need
		// protobuf's whole-message initialization check.
		return !mayNeedInitCheck(fd.Message())
	case protoreflect.EnumKind:
		if fd.Enum().IsClosed() {
			return false // out-of-range values would go to unknown fields
		}
	}
	return fd.Cardinality() == protoreflect.Repeated || !fd.HasPresence()
}

// isWeak reports whether a field is declared weak, which protobuf-go no
// longer supports. The option is read by name because its accessors are
// deprecated.
func isWeak(opts *descriptorpb.FieldOptions) bool {
	m := opts.ProtoReflect()
	weak := m.Descriptor().Fields().ByName("weak")
	return weak != nil && m.Get(weak).Bool()
}

// mayNeedInitCheck reports whether a message of type md, or one it can
// contain, may have required fields: fields of its own or carried by
// extensions.
func mayNeedInitCheck(md protoreflect.MessageDescriptor) bool {
	seen := map[protoreflect.FullName]bool{md.FullName(): true}
	queue := []protoreflect.MessageDescriptor{md}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		if next.RequiredNumbers().Len() > 0 || next.ExtensionRanges().Len() > 0 {
			return true
		}
		fields := next.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			if sub := fd.Message(); sub != nil && !seen[sub.FullName()] {
				seen[sub.FullName()] = true
				queue = append(queue, sub)
			}
		}
	}
	return false
}

// generateWireFile writes the _wire.pb.go of f if any of its messages gets
// a codec.
func generateWireFile(gen *protogen.Plugin, f *protogen.File, codecs map[protoreflect.FullName]bool) {
	var messages []*protogen.Message
	for _, m := range allMessages(f.Messages) {
		if codecs[m.Desc.FullName()] {
			messages = append(messages, m)
		}
	}
	if len(messages) == 0 {
		return
	}
	g := gen.NewGeneratedFile(f.GeneratedFilenamePrefix+wireFileSuffix, f.GoImportPath)
	g.P("// Code generated by granarygen. DO NOT EDIT.")
	g.P("// source: ", f.Desc.Path())
	g.P()
	g.P("package ", f.GoPackageName)
	w := &wireWriter{g: g, codecs: codecs, path: f.GoImportPath}
	for _, m := range messages {
		w.message(m)
	}
}

// wireWriter writes the codec methods of one file's messages.
type wireWriter struct {
	g      *protogen.GeneratedFile
	codecs map[protoreflect.FullName]bool
	path   protogen.GoImportPath
}

// id returns the name by which the generated file refers to name of
// package pkg, importing the package.
func (w *wireWriter) id(pkg protogen.GoImportPath, name string) string {
	return w.g.QualifiedGoIdent(pkg.Ident(name))
}

// hasCodec reports whether the message type of a field has a generated
// codec that this file can call with the current recursion depth: one in
// the same Go package, generated in the same run.
func (w *wireWriter) hasCodec(m *protogen.Message) bool {
	return w.codecs[m.Desc.FullName()] && m.GoIdent.GoImportPath == w.path
}

func (w *wireWriter) message(m *protogen.Message) {
	fields := slices.Clone(m.Fields)
	slices.SortFunc(fields, func(a, b *protogen.Field) int { return int(a.Desc.Number() - b.Desc.Number()) })
	name := m.GoIdent.GoName
	g := w.g

	g.P()
	g.P("// ", appendMethod, " appends m's wire encoding to b: the bytes proto.Marshal")
	g.P("// writes for m. A nil m appends nothing.")
	g.P("func (m *", name, ") ", appendMethod, "(b []byte) ([]byte, error) {")
	g.P("if m == nil {")
	g.P("return b, nil")
	g.P("}")
	for _, field := range fields {
		w.encodeField(field)
	}
	g.P("return append(b, m.unknownFields...), nil")
	g.P("}")

	g.P()
	g.P("// ", mergeMethod, " decodes b into m as proto.UnmarshalOptions{Merge: true}")
	g.P("// does: fields in b replace or, when repeated or messages, add to m's.")
	g.P("func (m *", name, ") ", mergeMethod, "(b []byte) error {")
	g.P("return m.", mergeDepthMethod, "(b, ", w.id(protowirePackage, "DefaultRecursionLimit"), ")")
	g.P("}")

	// The decoder jumps to one label for every malformed input, which keeps
	// its code small; each jump leaves only scopes nested in the loop.
	g.P()
	g.P("// ", mergeDepthMethod, " is ", mergeMethod, " with the number of message levels,")
	g.P("// this one included, that may still nest before the recursion limit.")
	g.P("func (m *", name, ") ", mergeDepthMethod, "(b []byte, depth int) error {")
	g.P("if depth--; depth < 0 {")
	g.P("return ", w.depthError(m))
	g.P("}")
	g.P("for len(b) > 0 {")
	g.P("tag, n := ", w.id(wirecodecPackage, "ConsumeVarint"), "(b)")
	g.P("if n < 0 {")
	g.P("goto invalid")
	g.P("}")
	g.P("b = b[n:]")
	g.P("switch tag {")
	for _, field := range m.Fields {
		w.decodeField(m, field)
	}
	g.P("default:")
	g.P("// Anything else, a known field number with another wire type")
	g.P("// included, is kept as an unknown field, as protobuf does.")
	g.P("if m.unknownFields, n = ", w.id(wirecodecPackage, "ConsumeUnknown"), "(m.unknownFields, tag, b); n < 0 {")
	g.P("goto invalid")
	g.P("}")
	g.P("b = b[n:]")
	g.P("}")
	g.P("}")
	g.P("return nil")
	g.P("invalid:")
	g.P("return ", w.id(wirecodecPackage, "InvalidError"), "(", strconv.Quote(string(m.Desc.FullName())), ")")
	g.P("}")
}

// depthError returns an expression making the error for input to m that
// nests too deep.
func (w *wireWriter) depthError(m *protogen.Message) string {
	return w.id(wirecodecPackage, "DepthError") + "(" + strconv.Quote(string(m.Desc.FullName())) + ")"
}

// utf8Error returns an expression making the error for a string field
// holding invalid UTF-8.
func (w *wireWriter) utf8Error(field *protogen.Field) string {
	return w.id(wirecodecPackage, "UTF8Error") + "(" + strconv.Quote(string(field.Desc.FullName())) + ")"
}

// tagBytes renders the encoded tag of field with wire type typ as a list
// of byte literals.
func tagBytes(field *protogen.Field, typ protowire.Type) string {
	tag := protowire.AppendTag(nil, field.Desc.Number(), typ)
	parts := make([]string, len(tag))
	for i, c := range tag {
		parts[i] = fmt.Sprintf("0x%02x", c)
	}
	return strings.Join(parts, ", ")
}

// tagValue renders the tag of field with wire type typ as the number the
// decoder reads.
func tagValue(field *protogen.Field, typ protowire.Type) string {
	return fmt.Sprintf("%#x", protowire.EncodeTag(field.Desc.Number(), typ))
}

// scalar describes how a scalar kind maps between its Go type and the wire.
type scalar struct {
	typ protowire.Type // VarintType, Fixed32Type or Fixed64Type
	// encode turns a Go value into the uint64 (varint), uint32 or uint64
	// (fixed) written; it is nonzero exactly when proto3 writes the value.
	encode string
	// decode turns the wire value back; both use %s for the operand.
	decode string
}

func (w *wireWriter) scalar(field *protogen.Field) scalar {
	protowireName := func(name string) string { return w.id(protowirePackage, name) }
	switch field.Desc.Kind() {
	case protoreflect.BoolKind:
		return scalar{protowire.VarintType, "", "%s != 0"}
	case protoreflect.EnumKind:
		return scalar{protowire.VarintType, "uint64(%s)", w.g.QualifiedGoIdent(field.Enum.GoIdent) + "(%s)"}
	case protoreflect.Int32Kind:
		// Conversion to uint64 sign-extends: negative values take ten bytes.
		return scalar{protowire.VarintType, "uint64(%s)", "int32(%s)"}
	case protoreflect.Int64Kind:
		return scalar{protowire.VarintType, "uint64(%s)", "int64(%s)"}
	case protoreflect.Uint32Kind:
		return scalar{protowire.VarintType, "uint64(%s)", "uint32(%s)"}
	case protoreflect.Uint64Kind:
		return scalar{protowire.VarintType, "%s", "%s"}
	case protoreflect.Sint32Kind:
		// protobuf drops the high bits before undoing the zigzag.
		return scalar{protowire.VarintType, protowireName("EncodeZigZag") + "(int64(%s))",
			"int32(" + protowireName("DecodeZigZag") + "(%s & " + w.id(mathPackage, "MaxUint32") + "))"}
	case protoreflect.Sint64Kind:
		return scalar{protowire.VarintType, protowireName("EncodeZigZag") + "(%s)", protowireName("DecodeZigZag") + "(%s)"}
	case protoreflect.Fixed32Kind:
		return scalar{protowire.Fixed32Type, "%s", "%s"}
	case protoreflect.Sfixed32Kind:
		return scalar{protowire.Fixed32Type, "uint32(%s)", "int32(%s)"}
	case protoreflect.FloatKind:
		// Comparing bits, not values, writes -0 and NaN as protobuf does.
		return scalar{protowire.Fixed32Type, w.id(mathPackage, "Float32bits") + "(%s)", w.id(mathPackage, "Float32frombits") + "(%s)"}
	case protoreflect.Fixed64Kind:
		return scalar{protowire.Fixed64Type, "%s", "%s"}
	case protoreflect.Sfixed64Kind:
		return scalar{protowire.Fixed64Type, "uint64(%s)", "int64(%s)"}
	case protoreflect.DoubleKind:
		return scalar{protowire.Fixed64Type, w.id(mathPackage, "Float64bits") + "(%s)", w.id(mathPackage, "Float64frombits") + "(%s)"}
	}
	panic(fmt.Sprintf("grainc: %s is not a scalar field", field.Desc.FullName()))
}

func (s scalar) enc(x string) string { return fmt.Sprintf(s.encode, x) }
func (s scalar) dec(x string) string { return fmt.Sprintf(s.decode, x) }

// fixedAppend returns the function appending a fixed-size wire value.
func (w *wireWriter) fixedAppend(typ protowire.Type) string {
	if typ == protowire.Fixed32Type {
		return w.id(binaryPackage, "LittleEndian") + ".AppendUint32"
	}
	return w.id(binaryPackage, "LittleEndian") + ".AppendUint64"
}

// fixedSize returns the wire size of a fixed-size value.
func fixedSize(typ protowire.Type) int {
	if typ == protowire.Fixed32Type {
		return 4
	}
	return 8
}

func (w *wireWriter) encodeField(field *protogen.Field) {
	g := w.g
	fd := field.Desc
	value := "m." + field.GoName
	g.P("// ", fd.Name(), " = ", fd.Number())
	// eachOrIf writes encode for every element of a list, or for the
	// single value when present is true of it.
	eachOrIf := func(present string, encode func(field *protogen.Field, value string)) {
		if fd.IsList() {
			g.P("for _, e := range ", value, " {")
			encode(field, "e")
		} else {
			g.P("if ", present, " {")
			encode(field, value)
		}
		g.P("}")
	}
	switch {
	case fd.Kind() == protoreflect.MessageKind:
		// A nil list element is written as an empty message, as protobuf does.
		eachOrIf(value+" != nil", w.encodeMessage)
	case fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind:
		eachOrIf("len("+value+") > 0", w.encodeBytes)
	case fd.IsList() && fd.IsPacked():
		w.encodePacked(field, value)
	case fd.IsList():
		g.P("for _, e := range ", value, " {")
		w.encodeScalar(field, "e", false)
		g.P("}")
	default:
		w.encodeScalar(field, value, true)
	}
}

// encodeScalar writes one tagged scalar; omitZero skips the zero value as
// proto3 does for implicit presence.
func (w *wireWriter) encodeScalar(field *protogen.Field, value string, omitZero bool) {
	g := w.g
	s := w.scalar(field)
	tag := tagBytes(field, s.typ)
	if field.Desc.Kind() == protoreflect.BoolKind {
		if omitZero {
			g.P("if ", value, " {")
			g.P("b = append(b, ", tag, ", 1)")
			g.P("}")
			return
		}
		g.P("if ", value, " {")
		g.P("b = append(b, ", tag, ", 1)")
		g.P("} else {")
		g.P("b = append(b, ", tag, ", 0)")
		g.P("}")
		return
	}
	if omitZero {
		g.P("if x := ", s.enc(value), "; x != 0 {")
	} else {
		g.P("{")
		g.P("x := ", s.enc(value))
	}
	if s.typ == protowire.VarintType {
		g.P("b = ", w.id(wirecodecPackage, "AppendVarint"), "(append(b, ", tag, "), x)")
	} else {
		g.P("b = ", w.fixedAppend(s.typ), "(append(b, ", tag, "), x)")
	}
	g.P("}")
}

// encodePacked writes a non-empty repeated scalar as one length-prefixed
// record.
func (w *wireWriter) encodePacked(field *protogen.Field, value string) {
	g := w.g
	s := w.scalar(field)
	tag := tagBytes(field, protowire.BytesType)
	g.P("if len(", value, ") > 0 {")
	switch {
	case field.Desc.Kind() == protoreflect.BoolKind:
		g.P("b = ", w.id(protowirePackage, "AppendVarint"), "(append(b, ", tag, "), uint64(len(", value, ")))")
		g.P("for _, e := range ", value, " {")
		g.P("if e {")
		g.P("b = append(b, 1)")
		g.P("} else {")
		g.P("b = append(b, 0)")
		g.P("}")
		g.P("}")
	case s.typ == protowire.VarintType:
		g.P("b = append(b, ", tag, ", 0)")
		g.P("start := len(b)")
		g.P("for _, e := range ", value, " {")
		g.P("b = ", w.id(wirecodecPackage, "AppendVarint"), "(b, ", s.enc("e"), ")")
		g.P("}")
		w.finishLength()
	default:
		g.P("b = ", w.id(protowirePackage, "AppendVarint"), "(append(b, ", tag, "), uint64(", fixedSize(s.typ), "*len(", value, ")))")
		g.P("for _, e := range ", value, " {")
		g.P("b = ", w.fixedAppend(s.typ), "(b, ", s.enc("e"), ")")
		g.P("}")
	}
	g.P("}")
}

// encodeBytes writes one tagged string or bytes value.
func (w *wireWriter) encodeBytes(field *protogen.Field, value string) {
	g := w.g
	if field.Desc.Kind() == protoreflect.StringKind {
		g.P("if !", w.id(utf8Package, "ValidString"), "(", value, ") {")
		g.P("return b, ", w.utf8Error(field))
		g.P("}")
	}
	tag := tagBytes(field, protowire.BytesType)
	g.P("b = append(", w.id(wirecodecPackage, "AppendVarint"), "(append(b, ", tag, "), uint64(len(", value, "))), ", value, "...)")
}

// encodeMessage writes one tagged message value, which may be nil.
//
// Rather than sizing the message first, it reserves one byte for the
// length, encodes the message after it, and moves the encoding along in
// the rare case that the length needs more bytes: one pass over the
// message, and none over its children.
func (w *wireWriter) encodeMessage(field *protogen.Field, value string) {
	g := w.g
	g.P("b = append(b, ", tagBytes(field, protowire.BytesType), ", 0)")
	g.P("start := len(b)")
	g.P("var err error")
	if w.hasCodec(field.Message) {
		g.P("if b, err = ", value, ".", appendMethod, "(b); err != nil {")
	} else {
		g.P("if b, err = (", w.id(protoPackage, "MarshalOptions"), "{}).MarshalAppend(b, ", value, "); err != nil {")
	}
	g.P("return b, err")
	g.P("}")
	w.finishLength()
}

// finishLength fills in the length of the record that starts at start,
// after the one byte reserved for its length.
func (w *wireWriter) finishLength() {
	g := w.g
	g.P("if n := len(b) - start; n < 0x80 {")
	g.P("b[start-1] = byte(n)")
	g.P("} else {")
	g.P("extra := ", w.id(protowirePackage, "SizeVarint"), "(uint64(n)) - 1")
	g.P("b = append(b, make([]byte, extra)...)")
	g.P("copy(b[start+extra:], b[start:start+n])")
	g.P(w.id(protowirePackage, "AppendVarint"), "(b[:start-1], uint64(n)) // in place: the room is there")
	g.P("}")
}

func (w *wireWriter) decodeField(m *protogen.Message, field *protogen.Field) {
	g := w.g
	fd := field.Desc
	value := "m." + field.GoName
	switch {
	case fd.Kind() == protoreflect.MessageKind:
		g.P("case ", tagValue(field, protowire.BytesType), ": // ", fd.Name())
		w.readBytes("v", "b")
		w.decodeMessage(m, field, value)
	case fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind:
		g.P("case ", tagValue(field, protowire.BytesType), ": // ", fd.Name())
		w.readBytes("v", "b")
		var decoded string
		if fd.Kind() == protoreflect.StringKind {
			g.P("if !", w.id(utf8Package, "Valid"), "(v) {")
			g.P("return ", w.utf8Error(field))
			g.P("}")
			decoded = "string(v)"
		} else if fd.IsList() {
			// An empty element is an empty, not a nil, slice in protobuf.
			decoded = "append([]byte{}, v...)"
		} else {
			// A singular empty value stays nil, as in protobuf.
			decoded = "append([]byte(nil), v...)"
		}
		if fd.IsList() {
			g.P(value, " = append(", value, ", ", decoded, ")")
		} else {
			g.P(value, " = ", decoded)
		}
	default:
		s := w.scalar(field)
		g.P("case ", tagValue(field, s.typ), ": // ", fd.Name())
		x := w.readScalar(s, "b")
		if fd.IsList() {
			g.P(value, " = append(", value, ", ", s.dec(x), ")")
		} else {
			g.P(value, " = ", s.dec(x))
		}
		if fd.IsList() {
			// Repeated scalars are accepted packed or not, whichever way
			// the field is declared.
			g.P("case ", tagValue(field, protowire.BytesType), ": // ", fd.Name(), ", packed")
			w.readBytes("v", "b")
			w.decodePacked(s, value)
		}
	}
}

// readScalar reads a scalar of s's wire type from src, advancing src, and
// returns the expression holding it.
func (w *wireWriter) readScalar(s scalar, src string) string {
	g := w.g
	if s.typ != protowire.VarintType {
		size := fixedSize(s.typ)
		g.P("if len(", src, ") < ", size, " {")
		g.P("goto invalid")
		g.P("}")
		read := "Uint32"
		if size == 8 {
			read = "Uint64"
		}
		g.P("x := ", w.id(binaryPackage, "LittleEndian"), ".", read, "(", src, ")")
		g.P(src, " = ", src, "[", size, ":]")
		return "x"
	}
	g.P("x, n := ", w.id(wirecodecPackage, "ConsumeVarint"), "(", src, ")")
	g.P("if n < 0 {")
	g.P("goto invalid")
	g.P("}")
	g.P(src, " = ", src, "[n:]")
	return "x"
}

// readBytes reads a length-prefixed value from src into a new variable
// named dst, advancing src.
func (w *wireWriter) readBytes(dst, src string) {
	g := w.g
	g.P("var ", dst, " []byte")
	g.P("if len(", src, ") > 0 && ", src, "[0] < 0x80 && int(", src, "[0]) < len(", src, ") {")
	g.P(dst, ", ", src, " = ", src, "[1:1+int(", src, "[0])], ", src, "[1+int(", src, "[0]):]")
	g.P("} else {")
	g.P("var n int")
	g.P("if ", dst, ", n = ", w.id(protowirePackage, "ConsumeBytes"), "(", src, "); n < 0 {")
	g.P("goto invalid")
	g.P("}")
	g.P(src, " = ", src, "[n:]")
	g.P("}")
}

// decodePacked appends the packed values in v to the repeated field.
func (w *wireWriter) decodePacked(s scalar, value string) {
	g := w.g
	if s.typ == protowire.VarintType {
		// Every varint ends in one byte below 0x80: count them to grow the
		// slice once.
		g.P("count := 0")
		g.P("for _, c := range v {")
		g.P("if c < 0x80 {")
		g.P("count++")
		g.P("}")
		g.P("}")
		g.P(value, " = ", w.id(slicesPackage, "Grow"), "(", value, ", count)")
	} else {
		size := fixedSize(s.typ)
		g.P("if len(v)%", size, " != 0 {")
		g.P("goto invalid")
		g.P("}")
		g.P(value, " = ", w.id(slicesPackage, "Grow"), "(", value, ", len(v)/", size, ")")
	}
	g.P("for len(v) > 0 {")
	x := w.readScalar(s, "v")
	g.P(value, " = append(", value, ", ", s.dec(x), ")")
	g.P("}")
}

// decodeMessage merges the message encoded in v into the field, or appends
// it to the repeated field.
func (w *wireWriter) decodeMessage(m *protogen.Message, field *protogen.Field, value string) {
	g := w.g
	typ := w.g.QualifiedGoIdent(field.Message.GoIdent)
	target := value
	if field.Desc.IsList() {
		target = "e"
		g.P("e := new(", typ, ")")
	} else {
		g.P("if ", value, " == nil {")
		g.P(value, " = new(", typ, ")")
		g.P("}")
	}
	if w.hasCodec(field.Message) {
		g.P("if err := ", target, ".", mergeDepthMethod, "(v, depth); err != nil {")
		g.P("return err")
		g.P("}")
	} else {
		// proto counts the levels from RecursionLimit down as this decoder
		// does, but takes a limit of 0 to mean its default.
		g.P("if depth == 0 {")
		g.P("return ", w.depthError(m))
		g.P("}")
		g.P("if err := (", w.id(protoPackage, "UnmarshalOptions"), "{Merge: true, RecursionLimit: depth}).Unmarshal(v, ", target, "); err != nil {")
		g.P("return err")
		g.P("}")
	}
	if field.Desc.IsList() {
		g.P(value, " = append(", value, ", e)")
	}
}
