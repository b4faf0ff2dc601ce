package grainc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/encoding/protowire"
)

// goDecl is a package-level Go identifier that generated code declares.
type goDecl struct {
	name string
	what string // what declares it, for error messages
	file string // the proto file it comes from
}

// describe names d's source in an error reported against file.
func (d goDecl) describe(file string) string {
	if d.file == file {
		return d.what
	}
	return d.what + " (" + d.file + ")"
}

// checkGrains checks the services of the files being generated and
// returns them by file. Besides checking each service alone, it refuses
// generated identifiers that would clash in their Go package: with each
// other, across all of the package's files being generated, or with the
// identifiers the .pb.go files of the package declare. pb holds the
// .pb.go of each file of those packages.
//
// The grain code of a file counts only when the file is being generated,
// since a file that is only imported may have been generated without it.
// The .pb.go of every file of the package in the request counts, since the
// package cannot use a proto file's types without it.
func checkGrains(gen *protogen.Plugin, bounded protowire.Number, pb map[*protogen.File][]byte) (map[*protogen.File][]grainService, error) {
	grains := make(map[*protogen.File][]grainService)
	var packages []protogen.GoImportPath // in the order of their first file, for stable errors
	for _, f := range gen.Files {
		if !f.Generate || len(f.Services) == 0 {
			continue
		}
		for _, s := range f.Services {
			service, err := checkService(s, bounded)
			if err != nil {
				return nil, err
			}
			grains[f] = append(grains[f], service)
		}
		if !slices.Contains(packages, f.GoImportPath) {
			packages = append(packages, f.GoImportPath)
		}
	}
	for _, pkg := range packages {
		if err := checkPackageNames(gen, pkg, grains, pb); err != nil {
			return nil, err
		}
	}
	return grains, nil
}

// checkPackageNames refuses grain code that would declare an identifier of
// Go package pkg twice.
func checkPackageNames(gen *protogen.Plugin, pkg protogen.GoImportPath, grains map[*protogen.File][]grainService, pb map[*protogen.File][]byte) error {
	declared := make(map[string]goDecl)
	for _, f := range gen.Files {
		if f.GoImportPath != pkg {
			continue
		}
		decls, err := pbDeclarations(f, pb[f])
		if err != nil {
			return err
		}
		for _, d := range decls {
			// Clashes within the .pb.go files are protoc-gen-go's to
			// resolve or report; the first declaration stands for all.
			if _, dup := declared[d.name]; !dup {
				declared[d.name] = d
			}
		}
	}
	for _, f := range gen.Files {
		if f.GoImportPath != pkg {
			continue
		}
		for _, s := range grains[f] {
			for _, d := range s.declarations() {
				if other, dup := declared[d.name]; dup {
					return fmt.Errorf("%w: %s: %s and %s would both be %s in Go package %s; rename one of them",
						ErrNameCollision, d.file, d.describe(d.file), other.describe(d.file), d.name, pkg)
				}
				declared[d.name] = d
			}
		}
	}
	return nil
}

// pbDeclarations lists the package-level identifiers of f's .pb.go, taken
// from the code protoc-gen-go writes, so that every kind of declaration
// counts (default values, extensions, public import aliases, enum value
// maps and whatever later versions add). src is that .pb.go.
func pbDeclarations(f *protogen.File, src []byte) ([]goDecl, error) {
	parsed, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("grainc: %s: %w", f.Desc.Path(), err)
	}

	described := pbDescriptions(f)
	file := f.Desc.Path()
	var decls []goDecl
	add := func(name *ast.Ident) {
		if name.Name == "_" || name.Name == "init" {
			return
		}
		what, ok := described[name.Name]
		if !ok {
			what = name.Name + " of " + f.GeneratedFilenamePrefix + ".pb.go"
		}
		decls = append(decls, goDecl{name: name.Name, what: what, file: file})
	}
	for _, decl := range parsed.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil {
				add(decl.Name)
			}
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					add(spec.Name)
				case *ast.ValueSpec:
					for _, name := range spec.Names {
						add(name)
					}
				}
			}
		}
	}
	return decls, nil
}

// pbDescriptions describes, by Go name, the declarations of f's .pb.go
// that come from one element of the contract.
func pbDescriptions(f *protogen.File) map[string]string {
	described := make(map[string]string)
	addEnums := func(enums []*protogen.Enum) {
		for _, e := range enums {
			described[e.GoIdent.GoName] = "enum " + string(e.Desc.FullName())
			described[e.GoIdent.GoName+"_name"] = "the name map of enum " + string(e.Desc.FullName())
			described[e.GoIdent.GoName+"_value"] = "the value map of enum " + string(e.Desc.FullName())
			for _, v := range e.Values {
				described[v.GoIdent.GoName] = "value " + string(v.Desc.Name()) + " of enum " + string(e.Desc.FullName())
			}
		}
	}
	addExtensions := func(extensions []*protogen.Extension) {
		for _, x := range extensions {
			described["E_"+x.GoIdent.GoName] = "extension " + string(x.Desc.FullName())
		}
	}
	addEnums(f.Enums)
	addExtensions(f.Extensions)
	for _, m := range allMessages(f.Messages) {
		described[m.GoIdent.GoName] = "message " + string(m.Desc.FullName())
		addEnums(m.Enums)
		addExtensions(m.Extensions)
		for _, field := range m.Fields {
			if field.Desc.HasDefault() {
				described["Default_"+m.GoIdent.GoName+"_"+field.GoName] = "the default of field " + string(field.Desc.FullName())
			}
		}
		for _, o := range m.Oneofs {
			if o.Desc.IsSynthetic() {
				continue
			}
			for _, field := range o.Fields {
				described[field.GoIdent.GoName] = "the wrapper type of oneof field " + string(field.Desc.FullName())
			}
		}
	}
	return described
}
