// Package newcomer holds the test that docs/getting-started.md works as
// written: it builds the page's module, with the page's own files, in a
// fresh directory, and runs its silo and client. It has no code of its own.
package newcomer
