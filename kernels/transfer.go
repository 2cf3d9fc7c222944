package kernels

// Transfer is one copy of DownloadAll: Src, backend memory, into Dst, a
// host Buffer of the same dtype and length.
type Transfer struct{ Dst, Src Buffer }

// BatchDownloader is implemented by a backend that can copy several
// Buffers to the host with one wait for its device (kernels/cuda's
// Device): a step that reads a few results pays one round trip, not one
// each.
type BatchDownloader interface {
	DownloadAll(ts ...Transfer) error
}

// DownloadAll copies each ts[i].Src into ts[i].Dst: with one wait on a
// BatchDownloader, one Download each otherwise (the CPU backends, where a
// Download is a copy).
func DownloadAll(b Backend, ts ...Transfer) error {
	if bd, ok := b.(BatchDownloader); ok {
		return bd.DownloadAll(ts...)
	}
	for _, t := range ts {
		if err := b.Download(t.Dst, t.Src); err != nil {
			return err
		}
	}
	return nil
}
