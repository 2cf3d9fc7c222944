package tokenizer

import (
	"math"
	"sync"
)

// scratch holds one Encode call's reusable buffers.
type scratch struct {
	syms  []int32
	ranks []int32
	ids   []int32
	q     mergeQueue
	next  []int32
	prev  []int32
}

const noRank = math.MaxInt32

// heapThreshold is the word length (bytes) above which bpe switches from the
// quadratic scan, fastest for short words, to a priority queue (measured
// crossover on Qwen3 with CJK words).
const heapThreshold = 48

func (t *Tokenizer) rankOf(a, b int32) (int32, int32) {
	if m, ok := t.merges[pairKey(a, b)]; ok {
		return m.rank, m.id
	}
	return noRank, -1
}

// bpe appends the tokens of one pre-tokenized word. It merges the pair with
// the lowest rank first and, among equal ranks, the leftmost one, as Hugging
// Face does ("aaaaa" → "aaaa" "a").
func (t *Tokenizer) bpe(dst []int32, w string, sc *scratch) []int32 {
	if len(w) > heapThreshold {
		return t.bpeHeap(dst, w, sc)
	}
	return t.bpeScan(dst, w, sc)
}

// bpeScan is bpe by repeated linear scans for the lowest rank: O(n²) but
// with the smallest constant.
func (t *Tokenizer) bpeScan(dst []int32, w string, sc *scratch) []int32 {
	// ranks[i] and ids[i] describe merging syms[i] with syms[i+1].
	syms, ranks, ids := sc.syms[:0], sc.ranks[:0], sc.ids[:0]
	for i := 0; i < len(w); i++ {
		syms = append(syms, t.byteIDs[w[i]])
	}
	for i := 0; i+1 < len(syms); i++ {
		r, id := t.rankOf(syms[i], syms[i+1])
		ranks = append(ranks, r)
		ids = append(ids, id)
	}
	for {
		best, bestRank := -1, int32(noRank)
		for i, r := range ranks {
			if r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] = ids[best]
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		ids = append(ids[:best], ids[best+1:]...)
		if best > 0 {
			ranks[best-1], ids[best-1] = t.rankOf(syms[best-1], syms[best])
		}
		if best < len(ranks) {
			ranks[best], ids[best] = t.rankOf(syms[best], syms[best+1])
		}
	}
	sc.syms, sc.ranks, sc.ids = syms, ranks, ids
	return append(dst, syms...)
}

// mergeCand is a candidate merge of the symbol at pos with its successor.
type mergeCand struct {
	rank, pos   int32
	left, right int32 // ids when queued; stale if either changed
}

// mergeQueue is a binary min-heap of candidates ordered by (rank, pos),
// typed to avoid container/heap's boxing.
type mergeQueue []mergeCand

func (c mergeCand) less(d mergeCand) bool {
	return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos
}

func (q *mergeQueue) push(c mergeCand) {
	h := append(*q, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *mergeQueue) pop() mergeCand {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].less(h[m]) {
			m = l
		}
		if r := l + 1; r < n && h[r].less(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// bpeHeap is bpe for long words: O(n log n) with a linked list of symbols.
// Ordering by (rank, position) gives the same leftmost-first result.
func (t *Tokenizer) bpeHeap(dst []int32, w string, sc *scratch) []int32 {
	n := len(w)
	syms, next, prev := sc.syms[:0], sc.next[:0], sc.prev[:0]
	for i := range n {
		syms = append(syms, t.byteIDs[w[i]])
		next = append(next, int32(i+1))
		prev = append(prev, int32(i-1))
	}
	next[n-1] = -1
	q := sc.q[:0]
	push := func(pos int32) {
		nx := next[pos]
		if nx < 0 {
			return
		}
		if r, _ := t.rankOf(syms[pos], syms[nx]); r != noRank {
			q.push(mergeCand{rank: r, pos: pos, left: syms[pos], right: syms[nx]})
		}
	}
	for i := range int32(n - 1) {
		push(i)
	}
	for len(q) > 0 {
		c := q.pop()
		nx := next[c.pos]
		if syms[c.pos] != c.left || nx < 0 || syms[nx] != c.right {
			continue // stale
		}
		_, id := t.rankOf(c.left, c.right)
		syms[c.pos] = id
		syms[nx] = -1
		next[c.pos] = next[nx]
		if nn := next[nx]; nn >= 0 {
			prev[nn] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			push(p)
		}
		push(c.pos)
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, syms[i])
	}
	sc.syms, sc.next, sc.prev, sc.q = syms, next, prev, q
	return dst
}

// maxCacheEntries bounds the word cache; it is emptied when full.
const maxCacheEntries = 1 << 17

// wordCache maps a pre-tokenized word to its tokens. It is the only mutable
// part of a Tokenizer, guarded by mu. Stored slices are never modified.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

func newWordCache() *wordCache { return &wordCache{m: make(map[string][]int32)} }

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if len(c.m) >= maxCacheEntries {
		clear(c.m)
	}
	c.m[w] = ids
	c.mu.Unlock()
}
