package counter

//go:generate go run github.com/granary-go/granary/proxy/cmd/granarygen -paths=source_relative counter.proto
