package gguf

import (
	"testing"

	"github.com/edgepipe/edgepipe/steps"
)

// The llama.cpp tools lose 10% with OMP_WAIT_POLICY=PASSIVE (see
// llamaCppWaitPolicy); a kind that drops the flag would quietly get it back.
func TestLlamaCppKindsKeepTheirWaitPolicy(t *testing.T) {
	for _, k := range []steps.Kind{ggufQuantize{}, imatrix{}, perplexity{}} {
		if !k.Resources(k.NewParams()).OwnWaitPolicy {
			t.Errorf("%s: Resources().OwnWaitPolicy is false; llama.cpp's OpenMP threads would be made PASSIVE", k.Name())
		}
	}
}
