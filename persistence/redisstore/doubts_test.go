package redisstore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/persistence"
)

func TestDoubtsHoldOnlyForTheirBase(t *testing.T) {
	var d doubts
	k := persistence.Key{GrainType: "t", GrainKey: "k", Name: "s"}
	other := persistence.Key{GrainType: "t", GrainKey: "other", Name: "s"}
	assert.Nil(t, d.alternates(k, "E"), "no doubt yet")
	d.settle(k) // nothing to settle

	d.add(k, "E", "P1")
	d.add(k, "E", "P2")
	d.add(k, "E", "P2") // a repeat is remembered once
	assert.Equal(t, []string{"P1", "P2"}, d.alternates(k, "E"))
	assert.Nil(t, d.alternates(k, "F"), "a caller with another expected etag is not the one that tried")
	assert.Nil(t, d.alternates(other, "E"))

	d.add(k, "F", "Q1") // the caller moved on: the old attempts no longer count
	assert.Nil(t, d.alternates(k, "E"))
	assert.Equal(t, []string{"Q1"}, d.alternates(k, "F"))

	d.settle(k)
	assert.Nil(t, d.alternates(k, "F"))
	assert.Zero(t, d.n.Load())
}

func TestDoubtsKeepTheNewest(t *testing.T) {
	var d doubts
	k := persistence.Key{GrainType: "t", GrainKey: "k", Name: "s"}
	for i := range maxDoubts + 3 {
		d.add(k, "E", fmt.Sprint(i))
	}
	got := d.alternates(k, "E")
	assert.Len(t, got, maxDoubts)
	assert.Equal(t, "3", got[0])
	assert.Equal(t, fmt.Sprint(maxDoubts+2), got[maxDoubts-1])
	got[0] = "changed"
	assert.Equal(t, "3", d.alternates(k, "E")[0], "callers get a copy")
}
