package grainc

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/proxy"
)

// Import paths of the packages generated grain code uses.
const (
	contextPackage = protogen.GoImportPath("context")
	protoPackage   = protogen.GoImportPath("google.golang.org/protobuf/proto")
	proxyPackage   = protogen.GoImportPath("github.com/granary-go/granary/proxy")
	actorPackage   = protogen.GoImportPath("github.com/granary-go/granary/actor")
)

// boundedOptionName is the full name of the method option that marks a
// bounded method, declared in granary/options.proto.
const boundedOptionName = "granary.bounded"

// grainFileSuffix ends the name of the file generated for a proto file's
// services.
const grainFileSuffix = "_grain.pb.go"

// boundedExtension returns the field number of the bounded option among the
// compiled files, or 0 when no file imports it (and so no method can be
// bounded). Taking the number from the descriptor keeps options.proto the
// one place that defines it.
func boundedExtension(gen *protogen.Plugin) protowire.Number {
	for _, f := range gen.Files {
		for _, x := range f.Extensions {
			if x.Desc.FullName() == boundedOptionName && x.Desc.ContainingMessage().FullName() == "google.protobuf.MethodOptions" {
				return protowire.Number(x.Desc.Number())
			}
		}
	}
	return 0
}

// isBounded reports whether method m sets the bounded option. It reads the
// option from the encoded options rather than through an extension type:
// depending on how the compiler resolved it, the value may be a known
// extension, a dynamic one or an unknown field, and all encode alike.
func isBounded(m *protogen.Method, number protowire.Number) (bool, error) {
	opts := m.Desc.Options()
	if number == 0 || opts == nil {
		return false, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(opts)
	if err != nil {
		return false, fmt.Errorf("grainc: options of %s: %w", m.Desc.FullName(), err)
	}
	bounded := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false, fmt.Errorf("grainc: options of %s: %w", m.Desc.FullName(), protowire.ParseError(n))
		}
		b = b[n:]
		if num == number && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false, fmt.Errorf("grainc: options of %s: %w", m.Desc.FullName(), protowire.ParseError(n))
			}
			bounded = v != 0 // the last occurrence wins, as when decoding
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false, fmt.Errorf("grainc: options of %s: %w", m.Desc.FullName(), protowire.ParseError(n))
		}
		b = b[n:]
	}
	return bounded, nil
}

// grainService is a service as the generated code needs it.
type grainService struct {
	*protogen.Service
	methods []grainMethod
}

// grainMethod is one method of a service as the generated code needs it.
type grainMethod struct {
	*protogen.Method
	id      uint32
	bounded bool
}

// checkService validates a service for grains and resolves its methods'
// ids and bounded flags.
func checkService(s *protogen.Service, bounded protowire.Number) (grainService, error) {
	service := string(s.Desc.FullName())
	methods := make([]grainMethod, 0, len(s.Methods))
	byID := make(map[uint32]string, len(s.Methods))
	byGoName := make(map[string]string, len(s.Methods))
	for _, m := range s.Methods {
		name := service + "/" + string(m.Desc.Name())
		if m.Desc.IsStreamingClient() || m.Desc.IsStreamingServer() {
			return grainService{}, fmt.Errorf("%w: %s: method %s streams; grain methods take one request and return one reply",
				ErrUnsupported, s.Location.SourceFile, name)
		}
		if m.GoName == "GrainID" {
			return grainService{}, fmt.Errorf("%w: %s: method %s would clash with the reference's GrainID method",
				ErrUnsupported, s.Location.SourceFile, name)
		}
		if other, dup := byGoName[m.GoName]; dup {
			return grainService{}, fmt.Errorf("%w: %s: methods %s and %s would both be the Go method %s; rename one of them",
				ErrNameCollision, s.Location.SourceFile, other, name, m.GoName)
		}
		byGoName[m.GoName] = name
		id := proxy.MethodID(service, string(m.Desc.Name()))
		if other, dup := byID[id]; dup {
			return grainService{}, fmt.Errorf("%w: %s: methods %s and %s share id %#08x; rename one of them",
				ErrMethodIDCollision, s.Location.SourceFile, other, name, id)
		}
		byID[id] = name
		b, err := isBounded(m, bounded)
		if err != nil {
			return grainService{}, err
		}
		methods = append(methods, grainMethod{Method: m, id: id, bounded: b})
	}
	return grainService{Service: s, methods: methods}, nil
}

// generateGrainFile writes the _grain.pb.go of a file with services, which
// checkGrains has checked.
func generateGrainFile(gen *protogen.Plugin, f *protogen.File, services []grainService) {
	g := gen.NewGeneratedFile(f.GeneratedFilenamePrefix+grainFileSuffix, f.GoImportPath)
	g.P("// Code generated by granarygen. DO NOT EDIT.")
	g.P("// source: ", f.Desc.Path())
	g.P()
	g.P("package ", f.GoPackageName)
	for _, s := range services {
		g.P()
		generateService(g, s)
	}
}

// names are the Go identifiers generated for one service.
type names struct {
	grainType, ref, newRef, grain, service, register string
}

func serviceNames(s *protogen.Service) names {
	return names{
		grainType: s.GoName + "GrainType",
		ref:       s.GoName + "Ref",
		newRef:    "New" + s.GoName + "Ref",
		grain:     s.GoName + "Grain",
		service:   s.GoName + "Service",
		register:  "Register" + s.GoName + "Grain",
	}
}

func methodDescName(s *protogen.Service, m grainMethod) string {
	return s.GoName + "_" + m.GoName + "_Method"
}

func callFuncName(s *protogen.Service, m grainMethod) string {
	return "_" + s.GoName + "_" + m.GoName + "_Call"
}

func invokeFuncName(s *protogen.Service, m grainMethod) string {
	return "_" + s.GoName + "_" + m.GoName + "_Invoke"
}

// declarations lists the package-level identifiers the generated code of s
// declares, for checkGrains to find clashes.
func (s grainService) declarations() []goDecl {
	n := serviceNames(s.Service)
	file := s.Location.SourceFile
	service := "service " + string(s.Desc.FullName())
	decls := []goDecl{
		{n.grainType, "the grain type of " + service, file},
		{n.ref, "the reference type of " + service, file},
		{n.newRef, "the reference constructor of " + service, file},
		{n.grain, "the grain interface of " + service, file},
		{n.service, "the service descriptor of " + service, file},
		{n.register, "the registration function of " + service, file},
	}
	for _, m := range s.methods {
		method := "method " + string(s.Desc.FullName()) + "/" + string(m.Desc.Name())
		decls = append(decls,
			goDecl{methodDescName(s.Service, m), "the descriptor of " + method, file},
			goDecl{callFuncName(s.Service, m), "the call function of " + method, file},
			goDecl{invokeFuncName(s.Service, m), "the dispatch function of " + method, file},
		)
	}
	return decls
}

// generateService writes the code of one service.
//
// A parameter or local named like an imported package hides the package in
// the function body, so the generated functions keep two rules. A function
// whose body names a type from a proto file's package, which may be called
// anything, declares only an underscore followed by a name that starts
// with a letter and is no keyword (_ctx, _out): protogen prefixes a package
// name with an underscore only when the name would otherwise start with a
// non-letter or be a keyword, so no package can be called that. The
// reference methods, whose parameter names users see, therefore leave
// their work to such a function, which costs no call: the method is small
// enough to be inlined. Other bodies name only packages of this module,
// imported as proxy or actor (with a number appended when a proto package
// took the name first), which no declared name equals.
func generateService(g *protogen.GeneratedFile, s grainService) {
	n := serviceNames(s.Service)
	methods := s.methods
	// Each package is named where it is first used, so that the file
	// imports only what it uses: a service without methods needs neither
	// context nor proto.
	ident := func(pkg protogen.GoImportPath, name string) string { return g.QualifiedGoIdent(pkg.Ident(name)) }

	g.P("// ", n.grainType, " is the grain type of ", s.GoName, " grains: the full")
	g.P("// protobuf name of the service.")
	g.P("const ", n.grainType, " = ", quote(string(s.Desc.FullName())))
	g.P()

	if len(methods) > 0 {
		g.P("// Method descriptors of ", s.GoName, ". Ids were computed by the generator with")
		g.P("// proxy.MethodID and are part of the wire contract.")
		g.P("var (")
		for _, m := range methods {
			kind := "an unbounded"
			if m.bounded {
				kind = "a bounded"
			}
			g.P("// ", methodDescName(s.Service, m), " describes ", s.GoName, ".", m.GoName, ", ", kind, " method.")
			g.P(methodDescName(s.Service, m), " = &", ident(proxyPackage, "MethodDesc"), "{Service: ", n.grainType,
				", Name: ", quote(string(m.Desc.Name())), fmt.Sprintf(", ID: %#08x, Bounded: %t}", m.id, m.bounded))
		}
		g.P(")")
		g.P()
	}

	// The client side.
	g.P(typeDoc(s.Comments.Leading,
		n.ref+" is a typed reference to a "+s.GoName+" grain. It is a small value;",
		"copies are cheap and safe to use concurrently."))
	g.P("type ", n.ref, " struct {")
	g.P("ref ", ident(proxyPackage, "Ref"))
	g.P("}")
	g.P()
	g.P("// ", n.newRef, " returns a reference to the ", s.GoName, " grain with the given")
	g.P("// key, whose calls go through c.")
	g.P("func ", n.newRef, "(c ", ident(proxyPackage, "Caller"), ", key string) ", n.ref, " {")
	g.P("return ", n.ref, "{ref: ", ident(proxyPackage, "NewRef"), "(c, ", n.grainType, ", key)}")
	g.P("}")
	g.P()
	g.P("// GrainID returns the identity of the referenced grain.")
	g.P("func (r ", n.ref, ") GrainID() ", ident(actorPackage, "GrainID"), " { return r.ref.GrainID() }")
	for _, m := range methods {
		in := g.QualifiedGoIdent(m.Input.GoIdent)
		out := g.QualifiedGoIdent(m.Output.GoIdent)
		g.P()
		var extra []string
		if m.bounded {
			extra = []string{
				"It is bounded: the grain gets a budget of 80% of the response timeout,",
				"or the time left before ctx's deadline when that is shorter.",
			}
		}
		g.P(methodDoc(m.Comments.Leading, m.GoName+" calls "+s.GoName+"."+m.GoName+" on the referenced grain.", extra...))
		g.P("func (r ", n.ref, ") ", m.GoName, "(ctx ", ident(contextPackage, "Context"), ", in *", in,
			", opts ...", ident(proxyPackage, "CallOption"), ") (*", out, ", error) {")
		g.P("return ", callFuncName(s.Service, m), "(ctx, r.ref, in, opts)")
		g.P("}")
	}
	g.P()

	// The server side.
	g.P(typeDoc(s.Comments.Leading,
		n.grain+" is the server side of "+s.GoName+": the methods a "+s.GoName+" grain",
		"implements."))
	g.P("type ", n.grain, " interface {")
	for _, m := range methods {
		var extra []string
		if m.bounded {
			extra = []string{
				"It is bounded: the call carries the caller's time budget, which",
				"starts when the method begins; read it with actor.Budget(ctx).",
			}
		}
		g.P(methodDoc(m.Comments.Leading, m.GoName+" handles "+s.GoName+"."+m.GoName+".", extra...))
		g.P(m.GoName, "(", ident(contextPackage, "Context"), ", *", g.QualifiedGoIdent(m.Input.GoIdent),
			") (*", g.QualifiedGoIdent(m.Output.GoIdent), ", error)")
	}
	g.P("}")
	g.P()
	g.P("// ", n.service, " describes ", s.GoName, " to a silo: its grain type and the")
	g.P("// methods a call can dispatch to.")
	g.P("var ", n.service, " = &", ident(proxyPackage, "ServiceDesc"), "{")
	g.P("Name: ", n.grainType, ",")
	g.P("HandlerType: (*", n.grain, ")(nil),")
	if len(methods) > 0 {
		g.P("Methods: []", ident(proxyPackage, "Method"), "{")
		for _, m := range methods {
			g.P("{")
			g.P("Desc: ", methodDescName(s.Service, m), ",")
			g.P("NewRequest: func() ", ident(protoPackage, "Message"), " { return new(", g.QualifiedGoIdent(m.Input.GoIdent), ") },")
			g.P("Invoke: ", invokeFuncName(s.Service, m), ",")
			g.P("},")
		}
		g.P("},")
	}
	g.P("}")
	g.P()
	g.P("// ", n.register, " makes the ", s.GoName, " grain type available on r;")
	g.P("// factory creates the grain of each new activation.")
	g.P("func ", n.register, "(r ", ident(proxyPackage, "Registrar"), ", factory func(id ", ident(actorPackage, "GrainID"), ") ", n.grain, ") error {")
	g.P("return r.RegisterGrain(", n.service, ", func(id ", ident(actorPackage, "GrainID"), ") any { return factory(id) })")
	g.P("}")

	for _, m := range methods {
		call := callFuncName(s.Service, m)
		out := g.QualifiedGoIdent(m.Output.GoIdent)
		g.P()
		g.P("// ", call, " is ", n.ref, ".", m.GoName, "'s body, with names no import can hide.")
		g.P("func ", call, "(_ctx ", ident(contextPackage, "Context"), ", _ref ", ident(proxyPackage, "Ref"),
			", _in *", g.QualifiedGoIdent(m.Input.GoIdent), ", _opts []", ident(proxyPackage, "CallOption"), ") (*", out, ", error) {")
		g.P("_out := new(", out, ")")
		g.P("if _err := _ref.Invoke(_ctx, ", methodDescName(s.Service, m), ", _in, _out, _opts...); _err != nil {")
		g.P("return nil, _err")
		g.P("}")
		g.P("return _out, nil")
		g.P("}")
	}
	for _, m := range methods {
		message := ident(protoPackage, "Message")
		g.P()
		g.P("func ", invokeFuncName(s.Service, m), "(_ctx ", ident(contextPackage, "Context"), ", _grain any, _req ", message, ") (", message, ", error) {")
		g.P("_out, _err := _grain.(", n.grain, ").", m.GoName, "(_ctx, _req.(*", g.QualifiedGoIdent(m.Input.GoIdent), "))")
		g.P("if _out == nil {")
		g.P("// A nil *", g.QualifiedGoIdent(m.Output.GoIdent), " would make a non-nil ", message, ".")
		g.P("return nil, _err")
		g.P("}")
		g.P("return _out, _err")
		g.P("}")
	}
}

// typeDoc renders the doc comment of a generated type: the generated
// summary, which names the type as Go doc comments do, then the service's
// comment from the contract.
func typeDoc(leading protogen.Comments, summary ...string) string {
	doc := commentLines(summary)
	if leading != "" {
		doc += "\n//\n" + strings.TrimSuffix(leading.String(), "\n")
	}
	return doc
}

// methodDoc renders the doc comment of a generated method: the method's
// comment from the contract, or the summary when it has none, then extra.
func methodDoc(leading protogen.Comments, summary string, extra ...string) string {
	doc := commentLines([]string{summary})
	if leading != "" {
		doc = strings.TrimSuffix(leading.String(), "\n")
	}
	if len(extra) > 0 {
		doc += "\n//\n" + commentLines(extra)
	}
	return doc
}

func commentLines(lines []string) string {
	return "// " + strings.Join(lines, "\n// ")
}

// quote renders s as a Go string literal.
func quote(s string) string { return fmt.Sprintf("%q", s) }
