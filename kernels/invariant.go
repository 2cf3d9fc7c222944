package kernels

// BatchInvariantSetter is a backend with a batch-invariant MatMul mode
// (kernels/cpu's Backend): while it is on, a row's result does not depend
// on the other rows of the call (how many, in which order) nor on the
// thread count. model.BatchOptions.BatchInvariant turns it on around each
// generation step. The mode is the backend's setting, not the call's.
type BatchInvariantSetter interface {
	SetBatchInvariant(on bool)
	BatchInvariant() bool
}
