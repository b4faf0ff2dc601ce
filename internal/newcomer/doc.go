// Package newcomer holds the test that docs/getting-started.md works as
// written: it runs the page's steps for a checkout in a fresh directory, as
// a user would (the module proxy reachable, no go.sum copied in), builds
// the page's module with the page's own files, and runs its silo and client. It has no code of its own.
package newcomer
