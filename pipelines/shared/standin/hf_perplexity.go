package standin

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"io"
)

func init() { standin.Tools["hf_perplexity.py"] = hfPerplexity }

// hfPerplexity: hf_perplexity.py --model DIR --text FILE --ctx N [--chunks K].
// Like the real script it needs a checkpoint and at least two chunks of
// text; its perplexity is the same function of the text as the stand-in
// llama-perplexity's F16 baseline.
func hfPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hf_perplexity", flag.ContinueOnError)
	model := fs.String("model", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	fs.String("add-bos", "auto", "")
	fs.Int("threads", 0, "")
	scores := standin.AddScoreFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *textFile == "" {
		return errors.New("usage: hf_perplexity.py --model DIR --text FILE [--ctx N] [--chunks K]")
	}
	ckpt, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	ppl, tokens, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	scored := n * (*nctx - 1 - *nctx/2)
	fmt.Fprintf(stderr, "[%d/%d] ppl so far %.4f\n", n, n, ppl)
	kl, top1, err := scores.Scores(ppl, scored, []byte(ckpt))
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(report.Perplexity{PPL: ppl, Tokens: tokens, Chunks: n, Ctx: *nctx, Scored: scored,
		KLDivergence: kl, Top1Agreement: top1})
}
