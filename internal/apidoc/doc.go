// Package apidoc holds the tests of the public packages' API: every
// exported name has a doc comment, no exported signature names an
// internal type, and no public package sets a variable of an internal
// one. It has no code of its own.
package apidoc
