package pyjson

import (
	"fmt"
	"math/rand/v2"
)

// UUID4 returns a version-4 UUID in Python's str(uuid4()) form, drawn from
// r so that a seeded environment is reproducible.
func UUID4(r *rand.Rand) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Seeds gives environment number i of a factory seeded with seed its own
// random stream.
func Seeds(seed, i uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, i*0x9E3779B97F4A7C15+1))
}
