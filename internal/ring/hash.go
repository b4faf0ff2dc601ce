package ring

import "github.com/granary-go/granary/actor"

// The hashes below decide which silo owns which grain. Every silo of a
// cluster must compute them identically, across processes, machines and
// granary versions that may run side by side during a rolling upgrade, so
// they are a fixed algorithm written out here (never hash/maphash, whose seed
// differs per process) and must not change without a migration plan:
//
//	bytes = uvarint(len(id.Type)) || id.Type || id.Key
//	Hash  = fmix64(FNV-1a-64(bytes))
//
// The length prefix makes the encoding unambiguous: ("a/b", "c") and
// ("a", "b/c") hash different byte strings. fmix64 (MurmurHash3's
// finalizer) spreads FNV's weak low-order bits over the whole word, which
// matters because ring positions are compared as whole 64-bit numbers.

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Hash returns the stable 64-bit position of a grain on the ring. It is the
// same on every silo and in every process.
func Hash(id actor.GrainID) uint64 {
	h := uint64(fnvOffset64)
	h = fnvUvarint(h, uint64(len(id.Type)))
	h = fnvString(h, id.Type)
	h = fnvString(h, id.Key)
	return fmix64(h)
}

// HashSilo returns the stable 64-bit hash of a silo id, for strategies that
// weigh silos against grains (rendezvous hashing).
func HashSilo(id string) uint64 { return fmix64(fnvString(fnvOffset64, id)) }

// Mix combines two well-mixed 64-bit hashes into a third, for example a
// grain's hash with a silo's into a rendezvous weight. It is not symmetric.
func Mix(a, b uint64) uint64 { return fmix64(a ^ fmix64(b+0x9e3779b97f4a7c15)) }

// pointHash is the ring position of virtual node i of silo id:
// fmix64(FNV-1a-64(uvarint(len(id)) || id || uvarint(i))).
func pointHash(id string, i int) uint64 {
	h := uint64(fnvOffset64)
	h = fnvUvarint(h, uint64(len(id)))
	h = fnvString(h, id)
	h = fnvUvarint(h, uint64(i))
	return fmix64(h)
}

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime64 }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime64
	}
	return h
}

func fnvUvarint(h uint64, v uint64) uint64 {
	for v >= 0x80 {
		h = fnvByte(h, byte(v)|0x80)
		v >>= 7
	}
	return fnvByte(h, byte(v))
}

// fmix64 is MurmurHash3's 64-bit finalizer: a bijection that makes every
// output bit depend on every input bit.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
