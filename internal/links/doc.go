// Package links keeps a silo's connections to the other silos of its
// cluster: one link to each, carrying calls both ways.
//
// Each end may dial the other when it needs a link first; when two links
// to the same silo come up, the one dialled by the silo with the smaller
// name is kept, on both ends, and the other is retired: no new call uses
// it, and it closes once the calls it carries are done. A link whose peer
// restarted (a new generation) replaces the old one.
//
// The package knows nothing of what a link delivers to: the silo gives it
// a function that makes a link's endpoint (the host behind the fence, the
// directory's forwarding), one that runs background work on the silo's
// own goroutines (which refuses once the silo stops), and the addresses of
// the membership view.
package links
