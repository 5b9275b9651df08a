// Package edge is edgepipe's knowledge of what a model needs on a device,
// worked out before any conversion runs: the model's shape read from its
// source without the network, the memory pre-flight (weights + KV cache +
// runtime overhead against what the device leaves to apps) with the fixes
// that would make a target fit, decode speed against the bandwidth ceiling
// and the target's budgets, and the platform picker behind `edgepipe pick`
// and `edgepipe init`.
//
// The arithmetic itself lives in internal/catalog; this package decides what
// to check, turns the numbers into sentences a user can act on, and never
// guesses silently: what it cannot know at plan time it says it did not
// check.
//
// Units follow the catalog: GB is 1e9 bytes.
package edge
