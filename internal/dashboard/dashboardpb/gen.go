// Package dashboardpb is the wire contract of the dashboard's statistics:
// what a silo asks another for its own part of the cluster's dashboard.
package dashboardpb

//go:generate go run github.com/granary-go/granary/proxy/cmd/granarygen -paths=source_relative stats.proto
