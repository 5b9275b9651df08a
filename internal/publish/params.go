package publish

import (
	"encoding/json"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// Params are a publish step's: everything the gate judges and the
// manifest records of its target, written out by the planner (which also
// ran the memory pre-flight once), so the publisher reads its request and
// nothing else. They are the publish step's cache key with its inputs'
// content: a change to any of them publishes again.
type Params struct {
	Recipe  string `json:"recipe"`
	Target  string `json:"target"`
	Device  string `json:"device"`
	Format  string `json:"format"`
	Context int    `json:"context"`
	KVDtype string `json:"kv_dtype"`
	// DecodeCeiling: the artifact decodes token by token (an LLM), so
	// the manifest records its decode ceiling on the device.
	DecodeCeiling bool `json:"decode_ceiling,omitempty"`
	// The perplexity gate: under WarnDelta is excellent, over MaxDelta
	// fails the target.
	WarnDelta float64 `json:"warn_delta"`
	MaxDelta  float64 `json:"max_delta"`
	// Budgets; unset ones stay out, so targets without budgets keep
	// their keys.
	MinTokensPerS   float64 `json:"min_tokens_per_s,omitempty"`
	MaxMemoryGB     float64 `json:"max_memory_gb,omitempty"`
	MaxFirstTokenMS float64 `json:"max_first_token_ms,omitempty"`
	// MaxAccuracyDrop is an image classifier's accuracy gate, absent when
	// it gates on agreement alone (and for text generation).
	MaxAccuracyDrop *float64 `json:"max_accuracy_drop,omitempty"`
	// MinAgreement is an image classifier's agreement gate.
	MinAgreement *float64 `json:"min_agreement,omitempty"`
	// MemoryFit and Budgets are the plan-time pre-flight: what the
	// target needs on its device, and its budgets' limits and
	// predictions; nil when the model's shape was unknown then.
	MemoryFit *manifest.MemoryFit `json:"memory_fit,omitempty"`
	Budgets   *manifest.Budgets   `json:"budgets,omitempty"`
	// FileStem, when set, is the model's name the artifact file is
	// published under: the model step's model-q8_0.gguf becomes
	// FileStem-q8_0.gguf. Empty keeps the step's names (a folder format
	// whose runtime reads fixed names).
	FileStem string `json:"file_stem,omitempty"`
}

// Remote is a place a target is pushed to once it is published.
type Remote struct {
	URL      string
	Insecure bool
}

// clone deep-copies a manifest record from the params, so that filling in
// what a run measured (a budget's actual) never writes into the plan.
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // manifest records always marshal
	}
	var c T
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}
