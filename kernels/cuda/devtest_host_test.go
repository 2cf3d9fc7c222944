//go:build cudahost && !cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// newTestDevice is the Device of the runtime tests in device_test.go: the
// host twin here (the GPU in device_cuda_test.go). It is closed at the end
// of the test.
func newTestDevice(t *testing.T) *Device {
	d := NewHost(2)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestPinnedRaceOnTwin: the order TestPinnedRoundTrip ran on the H200,
// without the wait between queueing the copy from page-locked memory and
// clearing that memory. On the twin the queued copy runs only when the
// host waits, after the clear, so the device gets zeros and the round trip
// returns nothing else: the twin reproduces the race every time, which is
// why the fixed test means something in make cudahost.
func TestPinnedRaceOnTwin(t *testing.T) {
	d := newTestDevice(t)
	want, got := pinnedRoundTrip(t, d, false)
	assert.NotEqual(t, want, got)
	assert.Equal(t, make([]float32, len(want)), got, "the copy read the cleared buffer")
}
