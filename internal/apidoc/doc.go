// Package apidoc holds the test that every exported name of the public
// packages has a doc comment. It has no code of its own.
package apidoc
