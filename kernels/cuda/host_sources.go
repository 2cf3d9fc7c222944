//go:build cudahost

package cuda

import "embed"

// hostSources are the kernel sources host.cc compiles through #include.
// The go command hashes a package's Go, C and header files but not .cu or
// .cuh ones, so without this a changed kernel would leave the host build's
// cached object (and test results run from it) stale; embedding them makes
// their bytes part of the package's build key.
//
//go:embed *.cu *.cuh
var hostSources embed.FS

var _ = hostSources // referenced only for its build key
