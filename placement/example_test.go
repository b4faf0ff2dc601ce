package placement_test

import (
	"fmt"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/placement"
)

// A gateway places a new grain with the strategy of its type. A hint for a
// live silo wins; a hint for a silo that is gone falls back to the strategy.
func ExamplePlace() {
	live := []placement.Candidate{
		{Silo: "silo-a", Load: 120},
		{Silo: "silo-b", Load: 80},
		{Silo: "silo-c", Load: 95},
	}
	id := actor.GrainID{Type: "shop.Cart", Key: "user-17"}

	hashed, _ := placement.Place(placement.HashBased{}, &placement.Request{Grain: id, Candidates: live})
	again, _ := placement.Place(placement.HashBased{}, &placement.Request{Grain: id, Candidates: live, Local: "silo-a"})
	fmt.Println("hash-based is stable:", hashed == again)

	hinted, _ := placement.Place(placement.HashBased{}, &placement.Request{Grain: id, Candidates: live, Hint: "silo-c"})
	fmt.Println("live hint:", hinted)

	fallback, _ := placement.Place(placement.HashBased{}, &placement.Request{Grain: id, Candidates: live, Hint: "silo-gone"})
	fmt.Println("dead hint falls back:", fallback == hashed)

	_, err := placement.Place(placement.Random{}, &placement.Request{Grain: id})
	fmt.Println(err)
	// Output:
	// hash-based is stable: true
	// live hint: silo-c
	// dead hint falls back: true
	// placement: no candidate silos
}
