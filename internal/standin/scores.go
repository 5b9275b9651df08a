package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/pplstat"
)

// ScoreFlags are the per-token score flags every scoring helper takes
// (ppl_scoring.add_score_args).
type ScoreFlags struct {
	Out, Baseline *string
	KeepTopK      *bool
}

// AddScoreFlags declares them on fs.
func AddScoreFlags(fs *flag.FlagSet) ScoreFlags {
	return ScoreFlags{Out: fs.String("scores-out", "", ""), Baseline: fs.String("baseline-scores", "", ""),
		KeepTopK: fs.Bool("keep-topk", false, "")}
}

// TopKFile is the baseline's top-token file the stand-ins write beside
// scores.nll: the real one is numpy's; the stand-ins' holds the sha256 of
// the baseline's scores, which is all a stand-in comparison reads.
const TopKFile = "scores.topk"

// Scores writes what a scoring stand-in leaves (scores.nll: n per-token
// values whose mean is log(ppl), spread by salt so that two models'
// files pair token for token but are not copies) and returns its KL
// divergence and top-1 agreement against the baseline's scores when
// asked: derived from the two files, so they move when either model does.
func (f ScoreFlags) Scores(ppl float64, n int, salt []byte) (kl, top1 *float64, err error) {
	nll := make([]float64, n)
	sum := sha256.Sum256(salt)
	mean := 0.0
	for i := range nll {
		b := sha256.Sum256(append(sum[:], byte(i), byte(i>>8), byte(i>>16)))
		nll[i] = float64(binary.LittleEndian.Uint16(b[:])) / 65535 // 0..1
		mean += nll[i]
	}
	mean /= float64(n)
	for i := range nll {
		nll[i] = math.Max(0, nll[i]-mean+math.Log(ppl))
	}
	if *f.Out != "" {
		if err := pplstat.WriteNLL(filepath.Join(*f.Out, pplstat.NLLFile), nll); err != nil {
			return nil, nil, err
		}
		if *f.KeepTopK {
			if err := os.WriteFile(filepath.Join(*f.Out, TopKFile), []byte(fmt.Sprintf("stand-in top tokens of %x\n", sum)), 0o644); err != nil {
				return nil, nil, err
			}
		}
	}
	if *f.Baseline == "" {
		return nil, nil, nil
	}
	if _, err := os.Stat(filepath.Join(*f.Baseline, TopKFile)); err != nil {
		return nil, nil, fmt.Errorf("--baseline-scores %s: no %s: %w", *f.Baseline, TopKFile, err)
	}
	base, err := pplstat.ReadNLL(filepath.Join(*f.Baseline, pplstat.NLLFile))
	if err != nil {
		return nil, nil, err
	}
	if len(base) != n {
		return nil, nil, fmt.Errorf("this model scored %d positions, the baseline %d: they do not compare", n, len(base))
	}
	d := math.Abs(math.Log(pplstat.PPL(nll)) - math.Log(pplstat.PPL(base)))
	k, a := d, math.Max(0, 1-d)
	return &k, &a, nil
}
