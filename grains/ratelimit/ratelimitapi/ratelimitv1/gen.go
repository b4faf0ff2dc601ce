package ratelimitv1

//go:generate go run github.com/granary-go/granary/internal/connectgen -I granary/ratelimit/v1=. -module github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1 granary/ratelimit/v1/ratelimit.proto
