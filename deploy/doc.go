// Package deploy holds what runs granary elsewhere than on a developer's
// machine: the container image's recipe (Dockerfile) and the Kubernetes
// manifests (kubernetes/), which docs/kubernetes.md walks through.
//
// It is a module of its own so that the Kubernetes API types its tests
// decode the manifests into never reach the framework's dependencies. The
// tests build cmd/granary from the same checkout and check the manifests
// against it: every flag and environment variable they set is one of the
// binary's, every container port is the port of the flag that binds it,
// the probes' paths are served, and the grace period covers the stop.
package deploy
