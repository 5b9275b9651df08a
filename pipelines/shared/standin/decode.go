package standin

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/edgepipe/edgepipe/pipelines/shared/report"
)

// DecodeReport is every family's decode stand-in: the numbers a decode
// helper would report for the artifact whose digest is artifact against
// the generate_reference.py stand-in's reference file. They are not
// measurements: each sequence's agreement (85% to 99% of its steps), KL
// and decode difference are functions of the artifact and the sequence,
// so another artifact or another reference moves them, and every step
// count comes from the reference.
func DecodeReport(artifact, referencePath, runtime string) (report.Decode, error) {
	rep := report.Decode{Runtime: runtime + " (stand-in)", PerSequence: []report.DecodeSequence{}}
	b, err := os.ReadFile(referencePath)
	if err != nil {
		return rep, err
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil || len(ref.Sequences) == 0 {
		return rep, fmt.Errorf("%s is not a reference with sequences (%v)", referencePath, err)
	}
	rep.MaxNewTokens = ref.MaxNewTokens
	var agreeSum, klSum, maxAbs float64
	for _, s := range ref.Sequences {
		n := len(s.Tokens)
		if n == 0 || len(s.TopK.IDs) != n {
			return rep, fmt.Errorf("reference sequence %s: %d tokens, %d top-k rows", s.ID, n, len(s.TopK.IDs))
		}
		h := hashOf(artifact + "/" + s.ID)
		frac := func(shift uint) float64 { return float64((h>>shift)%1000) / 1000 }
		agree := int(float64(n) * (0.85 + 0.14*frac(0)))
		var first *int
		if agree < n {
			f := int(h>>20) % (agree + 1)
			first = &f
		}
		kl, abs, top1 := 0.01+0.09*frac(30), 1e-6*(1+frac(40)), 1.0
		seq := report.DecodeSequence{ID: s.ID, PromptTokens: len(s.PromptIDs), Steps: n, DecodeMaxAbs: &abs, DecodeTop1: &top1,
			TokenAgreement: float64(agree) / float64(n), FirstDivergence: first, MeanKL: &kl, StoppedAtEOS: s.StoppedAtEOS,
			CrossesWindow: s.CrossesWindow}
		if s.StoppedAtEOS {
			stops := true
			seq.StopsLikeOriginal = &stops
			rep.StopsLikeOriginal = &stops
		}
		if c := s.CrossesWindow; c != nil {
			crossed := *c || (rep.CrossesWindow != nil && *rep.CrossesWindow)
			rep.CrossesWindow = &crossed
		}
		if first != nil && (rep.FirstDivergence == nil || *first < *rep.FirstDivergence) {
			rep.FirstDivergence = first
		}
		rep.PerSequence = append(rep.PerSequence, seq)
		rep.Sequences++
		rep.Steps += n
		agreeSum += float64(agree)
		klSum += kl * float64(n)
		maxAbs = max(maxAbs, abs)
	}
	top1 := 1.0
	meanKL := klSum / float64(rep.Steps)
	rep.TokenAgreement, rep.MeanKL, rep.DecodeMaxAbs, rep.DecodeTop1 = agreeSum/float64(rep.Steps), &meanKL, &maxAbs, &top1
	return rep, nil
}
