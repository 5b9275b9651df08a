package engine

import (
	"time"
)

// Phases of a run, summed over its steps, reported in the overhead event
// at the end of a run so a benchmark can say where edgepipe's own time
// goes next to the tools' (at -j 1 the sums are wall time; at -j 2 two
// steps' phases may overlap).
const (
	PhaseTools          = "tools_s"           // the conversion tools themselves (proc.Run)
	PhaseSourceDigest   = "source_digest_s"   // digesting a local model folder in place
	PhaseKeys           = "keys_s"            // cache keys: input digests, tool identities
	PhaseLookup         = "lookup_s"          // reading and checking cache records
	PhaseVerifyInputs   = "verify_inputs_s"   // rehashing cached inputs before a step runs
	PhaseCommit         = "hash_outputs_s"    // hashing a step's outputs into the cache
	PhasePublish        = "publish_s"         // copying, hashing, manifests, provenance, reports
	PhaseBandwidthProbe = "bandwidth_probe_s" // the bench step's memory-bandwidth probe (inside tools' step time, not a tool)
)

// phase starts timing name; call the result when it ends.
func (e *Engine) phase(name string) func() {
	start := time.Now()
	return func() { e.addPhase(name, time.Since(start)) }
}

func (e *Engine) addPhase(name string, d time.Duration) {
	e.phaseMu.Lock()
	defer e.phaseMu.Unlock()
	if e.phaseSums == nil {
		e.phaseSums = map[string]time.Duration{}
	}
	e.phaseSums[name] += d
}

// phases are the sums so far, in seconds.
func (e *Engine) phases() map[string]float64 {
	e.phaseMu.Lock()
	defer e.phaseMu.Unlock()
	out := map[string]float64{}
	for k, d := range e.phaseSums {
		out[k] = d.Seconds()
	}
	return out
}
