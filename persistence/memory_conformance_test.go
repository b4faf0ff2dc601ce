package persistence_test

import (
	"testing"

	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/storetest"
)

func TestMemoryStoreConforms(t *testing.T) {
	storetest.Run(t, func(*testing.T) persistence.Store { return persistence.NewMemoryStore() })
}
