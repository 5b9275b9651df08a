package publish

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

func TestBudgetChecks(t *testing.T) {
	out := &manifest.Bench{DecodeTokS: 40, FirstTokenMS: 120, PromptTokens: 128, Host: "h"}
	tgt := &Params{MinTokensPerS: 50, MaxFirstTokenMS: 150}
	checks := budgetChecks(tgt, out)
	if len(checks) != 2 || checks[0].Passed || !checks[1].Passed {
		t.Fatalf("checks %+v: want min_tokens_per_s failed (40 < 50), max_first_token_ms passed (120 <= 150)", checks)
	}
	if !strings.Contains(checks[0].Detail, "measured decode 40 tok/s on this host (h) against min_tokens_per_s 50") {
		t.Errorf("detail %q", checks[0].Detail)
	}
	if got := budgetChecks(&Params{}, out); len(got) != 0 {
		t.Errorf("no budgets: checks %v", got)
	}
	if got := budgetChecks(tgt, nil); len(got) != 0 {
		t.Errorf("no bench: checks %v", got)
	}
}
