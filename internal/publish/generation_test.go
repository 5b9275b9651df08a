package publish_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	. "github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/steps"
)

func decodeCheck(t *testing.T, agreementPassed bool) *steps.Output {
	maxAbs, top1, bound, minTop1, first, stops, kl := 6e-5, 1.0, 1e-3, 0.99, 2, true, 0.044
	return output(t, "llmc-decode:gptq-w4a16", "llmc-decode", map[string]string{steps.LogFile: "decoded\n"}, &steps.Result{
		Generation: &steps.Generation{Runtime: "transformers", Sequences: 4, Steps: 173, MaxNewTokens: 64,
			DecodeMaxAbs: &maxAbs, DecodeTop1: &top1, DecodeBound: &bound, DecodeMinTop1: &minTop1,
			TokenAgreement: 0.936, FirstDivergence: &first, MeanKL: &kl, StopsLikeOriginal: &stops,
			MinTokenAgreement: 0.5, MaxMeanKL: 1},
		Checks: []steps.Check{{Name: "decode consistency", Passed: true, Detail: "max 6e-05"},
			{Name: "generation agreement", Passed: agreementPassed, Detail: "token agreement 0.936 (min 0.5)"}}})
}

// A decode check's measurement is the manifest's metrics.generation, and
// its checks are the target's: a failed one is not published.
func TestGenerationIsRecordedAndGates(t *testing.T) {
	p := newPublisher(t)
	res, err := p.Publish(context.Background(), request(t, params(), check(t, 10.1, 10), decodeCheck(t, true)))
	if err != nil || res.Dir == "" {
		t.Fatalf("publish: %v", err)
	}
	m, err := manifest.Read(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Metrics.Generation
	if g == nil || g.TokenAgreement != 0.936 || g.MeanKL == nil || *g.MeanKL != 0.044 || g.FirstDivergence == nil || *g.FirstDivergence != 2 ||
		g.DecodeMaxAbs == nil || *g.DecodeMaxAbs != 6e-5 || g.Runtime != "transformers" || g.MinTokenAgreement != 0.5 {
		t.Fatalf("metrics.generation = %+v", g)
	}
	if !hasCheck(m, "llmc-decode:gptq-w4a16: generation agreement", true) || !hasCheck(m, "llmc-decode:gptq-w4a16: decode consistency", true) {
		t.Errorf("checks %+v", m.Metrics.Checks)
	}

	p = newPublisher(t)
	_, err = p.Publish(context.Background(), request(t, params(), check(t, 10.1, 10), decodeCheck(t, false)))
	var ge *GateError
	if !errors.As(err, &ge) || ge.Check == nil || ge.Check.Name != "generation agreement" || ge.Step != "llmc-decode:gptq-w4a16" {
		t.Fatalf("err = %v, want the generation agreement check of llmc-decode:gptq-w4a16", err)
	}
	if _, err := os.Stat(p.Dir("t1")); !errors.Is(err, os.ErrNotExist) {
		t.Error("published despite a failed generation agreement")
	}
}
