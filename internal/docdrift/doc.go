// Package docdrift holds the tests that keep docs/*.md true to the code:
// every Go snippet of the pages compiles against the packages it names, and
// every exported name the pages write as pkg.Name exists. It has no code of
// its own.
//
// A snippet is a fenced go block. One that begins with a package clause is
// compiled as a file as it stands. One that is a piece of a function is
// marked, on the line before its fence, with
//
//	<!-- fragment: ctx context.Context, secret []byte -->
//
// and compiled as the body of a function that takes those parameters (its
// free variables) and returns an error, so that it may return one. Its
// imports are the packages it names: the module's public ones and the few
// others listed in the test. A block that is not Go to compile, such as a
// listing of generated declarations without bodies, is marked
// <!-- not compiled: why -->. The getting-started page's files (blocks with
// a title) are built and run by package newcomer instead.
package docdrift
