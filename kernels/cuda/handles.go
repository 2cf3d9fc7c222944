package cuda

import "fmt"

// handles maps a driver's seam handles (streamH, eventH, graphH) to its own
// objects (a CUstream, the twin's queue), so no handle is an integer turned
// back into a pointer. Its driver locks around it.
type handles[H ~uintptr, V any] struct {
	what string
	last uintptr
	m    map[H]V
}

func newHandles[H ~uintptr, V any](what string) handles[H, V] {
	return handles[H, V]{what: what, m: map[H]V{}}
}

// add records v under a new handle (never 0).
func (t *handles[H, V]) add(v V) H {
	t.last++
	h := H(t.last)
	t.m[h] = v
	return h
}

// get returns h's object.
func (t *handles[H, V]) get(h H) (V, error) {
	v, ok := t.m[h]
	if !ok {
		return v, fmt.Errorf("%s %d does not exist", t.what, h)
	}
	return v, nil
}

// take returns h's object and forgets h.
func (t *handles[H, V]) take(h H) (V, error) {
	v, err := t.get(h)
	delete(t.m, h)
	return v, err
}
