package cuda

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/x/kernels"
)

// session is one op on a Device: it resolves the op's Buffers to device
// addresses (staging host Buffers through device scratch), queues its
// launches, and at the end copies staged outputs back (a sync point, only
// when there are any), frees its scratch in stream order and records its
// first failure as the sticky error. A Device reuses one session, so an
// op allocates nothing on the host. After a failure, or when the Device
// has failed already, the rest of the op is skipped.
type session struct {
	d     *Device
	op    string
	err   error
	temps []scratchBlock
	outs  []hostCopy
	slots []unsafe.Pointer // fetch's staging slots
}

// begin starts op on d.
func (d *Device) begin(op string) *session {
	d.live(op)
	s := &d.sess
	s.d, s.op, s.err = d, op, d.err
	s.temps, s.outs = s.temps[:0], s.outs[:0]
	return s
}

// scratchBlock is an op's scratch: its address and size.
type scratchBlock struct {
	p devptr
	n int64
}

// end finishes the op: staged outputs copied back, scratch freed, the
// first failure recorded. While a graph is being captured the scratch goes
// to the graph's own spare blocks instead, which later ops of the capture
// reuse (they run after this one on the stream, in every replay too) and
// which are freed when the Graph is closed: every replay writes them
// again, so handing them out after the capture would let a replay
// overwrite whatever was allocated there (TestSeamGraphScratch). A graph
// thus holds about the scratch of its largest op, not the sum of all.
func (s *session) end() {
	d := s.d
	if s.err == nil && len(s.outs) > 0 {
		s.err = d.fetch(s.outs)
	}
	for _, b := range s.temps {
		if d.graph != nil {
			d.graph.spare = append(d.graph.spare, b)
			continue
		}
		if err := d.sh.mem.free(b.p, d.stream); err != nil && s.err == nil {
			s.err = err
		}
	}
	d.fail(s.op, s.err)
}

// fail records err as the op's failure if it has none.
func (s *session) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// scratch returns n bytes of device memory freed at the end of the op.
func (s *session) scratch(n int64) devptr {
	if s.err != nil || n == 0 {
		return 0
	}
	if g := s.d.graph; g != nil {
		if b, ok := g.takeSpare(n); ok {
			s.temps = append(s.temps, b)
			return b.p
		}
	}
	p, err := s.d.sh.mem.alloc(n, s.d.stream)
	if err != nil {
		s.fail(fmt.Errorf("scratch of %d bytes: %w", n, err))
		return 0
	}
	s.temps = append(s.temps, scratchBlock{p, n})
	return p
}

// value uploads a Go value's bytes (a kernel's descriptor table, per-row
// parameters) into scratch and returns its device address. While a graph
// is captured, where an upload cannot be recorded, up to storeWordsMax
// bytes are written by a store_words launch carrying them as parameters
// (MatMulMany's descriptor of up to three GEMMs); more fail the capture.
func (s *session) value(b []byte) devptr {
	p := s.scratch(int64(len(b)))
	if p == 0 {
		return 0
	}
	if s.d.graph == nil || len(b) > storeWordsMax {
		s.fail(s.d.upload(p, unsafe.Pointer(unsafe.SliceData(b)), int64(len(b))))
		return p
	}
	var w [storeWordsMax / 8]int
	for i := range w {
		var x [8]byte
		copy(x[:], b[min(8*i, len(b)):min(8*i+8, len(b))])
		w[i] = int(binary.LittleEndian.Uint64(x[:]))
	}
	s.launch("store_words", rowPlan(1, 32), argsOf().ptr(p).i32((len(b)+7)/8).i64(w[0]).i64(w[1]).i64(w[2]).i64(w[3]).
		i64(w[4]).i64(w[5]).i64(w[6]).i64(w[7]).i64(w[8]).i64(w[9]).i64(w[10]).i64(w[11]).i64(w[12]).i64(w[13]).
		i64(w[14]).i64(w[15]))
	return p
}

// storeWordsMax is the most bytes store_words writes (16 64-bit words).
const storeWordsMax = 128

// bytesOf is the memory of a slice of plain values (no Go pointers).
func bytesOf[T any](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(x[0])))
}

// in returns the device address of an input Buffer: its own memory, or a
// staged copy of a host Buffer.
func (s *session) in(b kernels.Buffer) devptr { return s.stage(b, true, false) }

// out returns the device address of an output Buffer that the op writes
// in full: its own memory, or scratch copied back into the host Buffer at
// the end.
func (s *session) out(b kernels.Buffer) devptr { return s.stage(b, false, true) }

// inout is out for an output the op reads, accumulates into or writes
// only in part: a host Buffer is copied in as well.
func (s *session) inout(b kernels.Buffer) devptr { return s.stage(b, true, true) }

// stage returns b's device address; a host Buffer gets scratch, copied in
// before the launch (in) and back after the op (out).
func (s *session) stage(b kernels.Buffer, in, out bool) devptr {
	if b.Len() == 0 || s.err != nil {
		return 0
	}
	if !b.Host() {
		return s.d.addr(s.op, b)
	}
	n := bufBytes(b)
	p := s.scratch(n)
	if p == 0 {
		return 0
	}
	if in {
		s.fail(s.d.upload(p, b.HostPtr(), n))
	}
	if out {
		s.outs = append(s.outs, hostCopy{host: b.HostPtr(), dev: p, n: n})
	}
	return p
}

// mat returns the device address of a weight's Rows·Cols elements.
func (s *session) mat(w kernels.Mat) devptr { return s.in(w.Data.Slice(0, w.Rows*w.Cols)) }

// launch queues kernel with plan dm and the argument block a on the
// Device's stream.
func (s *session) launch(kernel string, dm dims, a *args) { s.launchWith(kernel, dm, 0, a) }

// launchWith is launch with smem bytes of dynamic shared memory.
func (s *session) launchWith(kernel string, dm dims, smem int, a *args) {
	if s.err != nil || dm.gx == 0 || dm.gy == 0 || dm.gz == 0 {
		return
	}
	if err := dm.check(kernel, smem); err != nil {
		s.fail(err)
		return
	}
	sh := s.d.sh
	k, err := sh.kernel(kernel)
	if err == nil {
		err = sh.drv.launchKernel(k, dm, smem, a, s.d.stream)
	}
	if err != nil {
		s.fail(err)
		return
	}
	sh.n.launches.Add(1)
}

// memset32 queues n 32-bit words of v at p.
func (s *session) memset32(p devptr, v uint32, n int64) {
	if s.err != nil || n == 0 {
		return
	}
	s.d.sh.n.memsets.Add(1)
	s.fail(s.d.sh.drv.memset32(p, v, n, s.d.stream))
}

// bufBytes is the size of b's elements in bytes.
func bufBytes(b kernels.Buffer) int64 { return int64(b.Len()) * int64(b.DType().Size()) }
