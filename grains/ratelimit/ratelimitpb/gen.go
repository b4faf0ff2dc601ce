package ratelimitpb

//go:generate go run github.com/granary-go/granary/proxy/cmd/granarygen -paths=source_relative ratelimit.proto
