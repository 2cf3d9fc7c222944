package cuda

import "fmt"

// Event marks a point of a Device's stream: the work queued on it before
// RecordEvent. Another Device of the same memory (NewStream) orders its
// later work after that point with WaitEvent, without the host waiting.
type Event struct {
	d *Device
	e eventH
}

// RecordEvent returns an Event at the current end of d's stream.
func (d *Device) RecordEvent() (*Event, error) {
	d.live("RecordEvent")
	if d.err != nil {
		return nil, d.err
	}
	e, err := d.sh.mark(d.stream)
	if err != nil {
		err = fmt.Errorf("kernels/cuda: RecordEvent: %w", err)
		d.fail("RecordEvent", err)
		return nil, err
	}
	return &Event{d: d, e: e}, nil
}

// WaitEvent makes the work queued on d after it wait until ev's stream
// has reached ev (the host does not wait).
func (d *Device) WaitEvent(ev *Event) error {
	d.live("WaitEvent")
	if d.err != nil {
		return d.err
	}
	if ev.d.sh != d.sh {
		panic("kernels/cuda: WaitEvent: an Event of another Device's memory")
	}
	if err := d.sh.drv.streamWait(d.stream, ev.e); err != nil {
		err = fmt.Errorf("kernels/cuda: WaitEvent: %w", err)
		d.fail("WaitEvent", err)
		return err
	}
	return nil
}

// Close destroys the event.
func (ev *Event) Close() error {
	if ev == nil || ev.e == 0 {
		return nil
	}
	err := ev.d.sh.drv.eventDestroy(ev.e)
	ev.e = 0
	return err
}
