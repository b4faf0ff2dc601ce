package actor

// GrainID identifies a grain cluster-wide: its type (the generated contract's
// service name) and a string key. A grain always exists logically; the
// runtime keeps at most one activation per GrainID.
type GrainID struct {
	// Type is the grain type: the full protobuf name of its contract.
	Type string
	// Key tells grains of one type apart.
	Key string
}

// String formats the identity as "type/key".
func (id GrainID) String() string { return id.Type + "/" + id.Key }

// IsZero reports whether the identity is empty.
func (id GrainID) IsZero() bool { return id.Type == "" && id.Key == "" }
