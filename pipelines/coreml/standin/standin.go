// Package standin holds the coreml family's stand-ins (see internal/standin).
package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/coreml/report"
)

func init() {
	standin.Tools["coreml_convert.py"] = coremlConvert
	standin.Tools["coreml_validate.py"] = coremlValidate
}

// coremlManifest is the stand-in package's Manifest.json: the real keys
// (fileFormatVersion, itemInfoEntries), plus what the stand-in validator
// checks, so a package made with other settings fails like the real one.
type coremlManifest struct {
	FileFormatVersion string                       `json:"fileFormatVersion"`
	ItemInfoEntries   map[string]map[string]string `json:"itemInfoEntries"`
	StandIn           struct {
		WeightDtype string `json:"weight_dtype"`
		BlockSize   int    `json:"block_size"`
		Context     int    `json:"context"`
		KVCache     string `json:"kv_cache"`
		Mode        string `json:"mode"`
		Embeddings  bool   `json:"quantize_embeddings"`
		VDownBits   int    `json:"v_down_bits"`
		Source      string `json:"source_sha256"`
	} `json:"edgepipe_standin"`
}

// coremlConvert: coreml_convert.py --model DIR --out OUT.mlpackage --context N
// [--block-size B] [--mode affine|symmetric] [--quantize-embeddings]
// [--v-down-bits 4|8] [--kv-cache stateful|none] [--threads T]
func coremlConvert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coreml_convert", flag.ContinueOnError)
	model := fs.String("model", "", "")
	out := fs.String("out", "", "")
	ctxLen := fs.Int("context", 0, "")
	block := fs.Int("block-size", 32, "")
	mode := fs.String("mode", "affine", "")
	embed := fs.Bool("quantize-embeddings", false, "")
	vdown := fs.Int("v-down-bits", 4, "")
	kv := fs.String("kv-cache", "stateful", "")
	fs.Int("threads", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *out == "" || *ctxLen < 2 {
		return errors.New("usage: coreml_convert.py --model DIR --out OUT.mlpackage --context N")
	}
	if *mode != "affine" && *mode != "symmetric" {
		return fmt.Errorf("--mode %q: want affine or symmetric", *mode)
	}
	if *vdown != 4 && *vdown != 8 {
		return fmt.Errorf("--v-down-bits %d: want 4 or 8", *vdown)
	}
	h := sha256.New()
	cfg, err := os.ReadFile(filepath.Join(*model, "config.json"))
	if err != nil {
		return fmt.Errorf("no config.json in %s", *model)
	}
	h.Write(cfg)
	shards, _ := filepath.Glob(filepath.Join(*model, "*.safetensors"))
	if len(shards) == 0 {
		return fmt.Errorf("no *.safetensors in %s", *model)
	}
	sort.Strings(shards)
	var payload []byte
	for _, s := range shards {
		b, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		h.Write(b)
		payload = append(payload, b...)
	}
	data := filepath.Join(*out, "Data", "com.apple.CoreML")
	if err := os.MkdirAll(filepath.Join(data, "weights"), 0o755); err != nil {
		return err
	}
	var m coremlManifest
	m.FileFormatVersion = "1.0.0"
	m.ItemInfoEntries = map[string]map[string]string{
		"model":   {"author": "com.apple.CoreML", "path": "com.apple.CoreML/model.mlmodel"},
		"weights": {"author": "com.apple.CoreML", "path": "com.apple.CoreML/weights"},
	}
	m.StandIn.WeightDtype, m.StandIn.BlockSize, m.StandIn.Context, m.StandIn.KVCache = "int4", *block, *ctxLen, *kv
	m.StandIn.Mode, m.StandIn.Embeddings, m.StandIn.VDownBits = *mode, *embed, *vdown
	m.StandIn.Source = hex.EncodeToString(h.Sum(nil))
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "Manifest.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	spec := fmt.Sprintf("edgepipe stand-in ML program (not a Core ML model): iOS18, fp16 compute, context %d\n", *ctxLen)
	if err := os.WriteFile(filepath.Join(data, "model.mlmodel"), []byte(spec), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "weights", "weight.bin"), standin.Resample(payload, weightBits(*block, *mode, *embed, *vdown)/32), 0o644); err != nil {
		return err
	}
	kept := []string{"m_model_embed_tokens_weight_to_fp16"}
	if *embed {
		kept = []string{}
	}
	return standin.PrintJSON(stdout, report.Convert{KVCache: *kv, KVCacheReason: "stand-in: nothing was traced",
		Context: *ctxLen, Inputs: []string{"input_ids", "causal_mask"}, Outputs: []string{"logits"},
		Mode: *mode, KeptFP16: kept, CoreMLTools: "stand-in", Torch: "none"})
}

// weightBits is the stand-in's bits per weight: int4 plus an fp16 scale per
// block (and an fp16 offset, affine); fp16 embeddings, a tenth of a small
// model's weights, raise it, and so do 8-bit value and down projections,
// about 28% of a Llama-style layer's weights.
func weightBits(block int, mode string, embed bool, vdown int) float64 {
	bits := 4 + 16/float64(max(block, 1))
	if mode == "affine" {
		bits += 16 / float64(max(block, 1))
	}
	if vdown == 8 {
		bits += 0.28 * 4
	}
	if !embed {
		bits += 0.1 * (16 - bits)
	}
	return bits
}

// ownBaselineScores does what coreml_validate.py does with its own
// baseline: the unconverted model's scores and top tokens in
// out/baseline, the package's in out (a folder that lasts the call when
// out is ""), and the package's KL divergence and top-1 agreement
// against them. The checkpoint's digest and the package's manifest make
// each side's scores its own.
func ownBaselineScores(out string, res report.Validate, ckpt string, manifest []byte) (kl, top1 *float64, err error) {
	if out == "" {
		tmp, err := os.MkdirTemp("", "coreml-validate-scores-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(tmp)
		out = tmp
	}
	baseDir, none, yes, no := filepath.Join(out, "baseline"), "", true, false
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		return nil, nil, err
	}
	base := standin.ScoreFlags{Out: &baseDir, Baseline: &none, KeepTopK: &yes}
	if _, _, err := base.Scores(res.BaselinePPL, res.Scored, []byte(ckpt)); err != nil {
		return nil, nil, err
	}
	return standin.ScoreFlags{Out: &out, Baseline: &baseDir, KeepTopK: &no}.Scores(res.PPL, res.Scored, manifest)
}

// coremlValidate: coreml_validate.py --package P --model DIR --text T [--ctx N]
// [--chunks K] [--block-size B] [--mode M] [--quantize-embeddings] [--threads T]
// [--scores-out DIR]
func coremlValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coreml_validate", flag.ContinueOnError)
	pkg := fs.String("package", "", "")
	model := fs.String("model", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	block := fs.Int("block-size", 32, "")
	mode := fs.String("mode", "affine", "")
	embed := fs.Bool("quantize-embeddings", false, "")
	vdown := fs.Int("v-down-bits", 4, "")
	fs.Int("threads", 0, "")
	scoresOut := fs.String("scores-out", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(*pkg, "Manifest.json"))
	if err != nil {
		return fmt.Errorf("%s is not an .mlpackage: %w", *pkg, err)
	}
	var m coremlManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("read the package's Manifest.json: %w", err)
	}
	if _, err := os.Stat(filepath.Join(*model, "config.json")); err != nil {
		return fmt.Errorf("no config.json in %s", *model)
	}
	base, _, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	blockOK := m.StandIn.WeightDtype == "int4" && m.StandIn.BlockSize == *block && m.StandIn.Mode == *mode &&
		m.StandIn.Embeddings == *embed && m.StandIn.VDownBits == *vdown
	checks := []report.Check{
		{Name: "reloads without compiling", Passed: true, Detail: "stand-in: Manifest.json parsed"},
		{Name: "weights are int4, " + *mode + ", per block", Passed: blockOK,
			Detail: fmt.Sprintf("stand-in package says %s %s, block %d, embeddings quantized %t, v/down %d bits; expected int4 %s, block %d, %t, %d bits",
				m.StandIn.WeightDtype, m.StandIn.Mode, m.StandIn.BlockSize, m.StandIn.Embeddings, m.StandIn.VDownBits, *mode, *block, *embed, *vdown)},
	}
	bits := weightBits(m.StandIn.BlockSize, m.StandIn.Mode, m.StandIn.Embeddings, m.StandIn.VDownBits)
	res := report.Validate{Checks: checks, PPL: base + standin.Drift(bits), BaselinePPL: base,
		Chunks: n, Ctx: *nctx, Scored: n * (*nctx - 1 - *nctx/2),
		Compute: "stand-in, nothing computed", Simulated: "stand-in numbers derived from the text",
		BlockSize: *block, Mode: *mode, KeptFP16: []string{}, CoreMLReason: "stand-in"}
	ckpt, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	if res.KLDivergence, res.Top1Agreement, err = ownBaselineScores(*scoresOut, res, ckpt, b); err != nil {
		return err
	}
	return standin.PrintJSON(stdout, res)
}
