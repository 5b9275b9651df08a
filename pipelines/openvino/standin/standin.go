// Package standin holds the openvino family's stand-ins (see
// internal/standin): they read the real inputs (the checkpoint, the
// export, the calibration and evaluation texts) and derive their outputs
// from them, so digests and gates move when inputs move. Their numbers are
// not measurements.
package standin

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/openvino/report"
)

func init() {
	standin.Tools["openvino_export.py"] = ovExport
	standin.Tools["openvino_quantize.py"] = ovQuantize
	standin.Tools["openvino_validate.py"] = ovValidate
	standin.Tools["openvino_bench.py"] = ovBench
}

// Header is the stand-in IR's metadata, kept in an XML comment after the
// <net> element so the file still opens like an IR.
type Header struct {
	StandIn    bool    `json:"standin"`
	Kind       string  `json:"kind"` // fp32 | int4 | int8
	Bits       float64 `json:"bits"`
	HiddenSize int     `json:"hidden_size"`
	Source     string  `json:"source_sha256"`
	Settings   string  `json:"settings,omitempty"`
}

const (
	xmlName = "openvino_model.xml"
	binName = "openvino_model.bin"
	marker  = "<!-- edgepipe-standin "
)

func writeIR(dir string, h Header, weights []byte) error {
	meta, err := json.Marshal(h)
	if err != nil {
		return err
	}
	xml := fmt.Sprintf("<?xml version=\"1.0\"?>\n<net name=\"standin\" version=\"11\">\n%s%s -->\n</net>\n", marker, meta)
	if err := os.WriteFile(filepath.Join(dir, xmlName), []byte(xml), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, binName), weights, 0o644)
}

func readIR(dir string) (Header, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, xmlName))
	if err != nil {
		return Header{}, nil, err
	}
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		return Header{}, nil, fmt.Errorf("%s is not a stand-in OpenVINO IR", filepath.Join(dir, xmlName))
	}
	rest := b[i+len(marker):]
	end := bytes.Index(rest, []byte(" -->"))
	var h Header
	if end < 0 || json.Unmarshal(rest[:end], &h) != nil {
		return Header{}, nil, fmt.Errorf("%s: bad stand-in header", dir)
	}
	w, err := os.ReadFile(filepath.Join(dir, binName))
	return h, w, err
}

// irReport is what the real export and quantize scripts read back from
// the IR they wrote.
func irReport(dir string, weights map[string]report.WeightCensus, low float64) report.IR {
	ents, _ := os.ReadDir(dir)
	files := []string{}
	for _, e := range ents {
		if !e.IsDir() {
			files = append(files, e.Name())
		}
	}
	return report.IR{Model: xmlName, Files: files, Weights: weights, LowBitFraction: low,
		Inputs: []string{"input_ids", "attention_mask", "position_ids", "beam_idx"}, Outputs: []string{"logits"},
		Stateful: true, Versions: map[string]string{}}
}

// ovExport: openvino_export.py --model DIR --out DIR [--trust-remote-code] [--threads N]
func ovExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openvino_export", flag.ContinueOnError)
	model := fs.String("model", "", "")
	out := fs.String("out", "", "")
	trust := fs.Bool("trust-remote-code", false, "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return errors.New("usage: openvino_export.py --model DIR --out DIR")
	}
	sum, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	cfg, err := os.ReadFile(filepath.Join(*model, "config.json"))
	if err != nil {
		return err
	}
	var c struct {
		HiddenSize int            `json:"hidden_size"`
		AutoMap    map[string]any `json:"auto_map"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	if c.AutoMap != nil && !*trust {
		return errors.New("the model needs its own code (auto_map) and --trust-remote-code was not given")
	}
	shards, _ := filepath.Glob(filepath.Join(*model, "*.safetensors"))
	var payload []byte
	for _, s := range shards {
		p, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		payload = append(payload, p...)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(*model, *out); err != nil {
		return err
	}
	h := Header{StandIn: true, Kind: "fp32", Bits: 32, HiddenSize: c.HiddenSize, Source: sum}
	if err := writeIR(*out, h, payload); err != nil {
		return err
	}
	n := int64(len(payload))
	fmt.Fprintf(stderr, "stand-in OpenVINO export of %s\n", *model)
	return standin.PrintJSON(stdout, report.Export{IR: irReport(*out, map[string]report.WeightCensus{"f32": {Constants: 1, Elements: n / 4, Bytes: n}}, 0)})
}

type quantFlags struct {
	in, out, format, fallback, calibration *string
	group, samples, seqLen                 *int
	ratio                                  *float64
	sym, allLayers, awq, se, gptq          *bool
}

func parseQuant(args []string) (*quantFlags, error) {
	fs := flag.NewFlagSet("openvino_quantize", flag.ContinueOnError)
	q := &quantFlags{in: fs.String("in", "", ""), out: fs.String("out", "", ""), format: fs.String("weight-format", "", ""),
		fallback: fs.String("group-size-fallback", "error", ""), calibration: fs.String("calibration", "", ""),
		group: fs.Int("group-size", 128, ""), samples: fs.Int("samples", 32, ""), seqLen: fs.Int("seq-len", 256, ""),
		ratio: fs.Float64("ratio", 1, ""), sym: fs.Bool("sym", false, ""), allLayers: fs.Bool("all-layers", false, ""),
		awq: fs.Bool("awq", false, ""), se: fs.Bool("scale-estimation", false, ""), gptq: fs.Bool("gptq", false, "")}
	fs.Bool("trust-remote-code", false, "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if *q.format != "int4" && *q.format != "int8" {
		return nil, fmt.Errorf("--weight-format %q: want int4 or int8", *q.format)
	}
	if !(*q.ratio > 0 && *q.ratio <= 1) {
		return nil, fmt.Errorf("--ratio %v: want (0, 1]", *q.ratio)
	}
	return q, nil
}

// bits is the stand-in's bits per weight: 4 bits plus a 16-bit scale per
// group (and a 4-bit zero point when asymmetric), the 8-bit share by ratio.
func (q *quantFlags) bits(hidden int) (float64, error) {
	if *q.format == "int8" {
		return 8 + 16.0/math.Max(float64(hidden), 64), nil
	}
	g := *q.group
	if g > 0 && hidden%g != 0 {
		switch *q.fallback {
		case "error":
			return 0, fmt.Errorf("group size %d does not divide the channel size %d: set the group size fallback to ignore or adjust", g, hidden)
		case "adjust":
			for g > 32 && hidden%g != 0 {
				g /= 2
			}
		}
	}
	if g <= 0 {
		g = max(hidden, 64)
	}
	b := 4 + 16/float64(g)
	if !*q.sym {
		b += 4 / float64(g)
	}
	return *q.ratio*b + (1-*q.ratio)*8, nil
}

// ovQuantize: openvino_quantize.py --in DIR --out DIR --weight-format int4|int8 [...]
func ovQuantize(args []string, stdout, stderr io.Writer) error {
	q, err := parseQuant(args)
	if err != nil {
		return err
	}
	h, payload, err := readIR(*q.in)
	if err != nil {
		return err
	}
	if h.Kind != "fp32" {
		return fmt.Errorf("%s is already compressed (%s)", *q.in, h.Kind)
	}
	bits, err := q.bits(h.HiddenSize)
	if err != nil {
		return err
	}
	settings := fmt.Sprintf("%s sym=%v group=%d ratio=%v all_layers=%v", *q.format, *q.sym, *q.group, *q.ratio, *q.allLayers)
	config := q.config()
	samples := 0
	if *q.awq || *q.se || *q.gptq {
		text, err := os.ReadFile(*q.calibration)
		if err != nil {
			return fmt.Errorf("the data-aware methods need --calibration: %w", err)
		}
		words := len(strings.Fields(string(text)))
		samples = min(*q.samples, max(words / *q.seqLen, 1))
		config["num_samples"] = samples
		// Calibration recovers part of the rounding loss.
		bits += 0.5
		settings += fmt.Sprintf(" awq=%v se=%v gptq=%v calibration=%d words", *q.awq, *q.se, *q.gptq, words)
	}
	if err := os.MkdirAll(*q.out, 0o755); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(*q.in, *q.out); err != nil {
		return err
	}
	os.Remove(filepath.Join(*q.out, xmlName))
	h.Kind, h.Bits, h.Settings = *q.format, bits, settings
	weights := standin.Resample(payload, bits/32)
	if err := writeIR(*q.out, h, weights); err != nil {
		return err
	}
	low := "u4"
	if *q.format == "int8" {
		low = "u8"
	}
	n := int64(len(weights))
	fmt.Fprintf(stderr, "stand-in NNCF compression: %s\n", settings)
	return standin.PrintJSON(stdout, report.Quantize{IR: irReport(*q.out, map[string]report.WeightCensus{low: {Constants: 1, Elements: n * 2, Bytes: n}}, *q.ratio),
		Config: config, CalibrationSamples: samples})
}

// config is the OVWeightQuantizationConfig settings the real script
// reports, less the calibration strings.
func (q *quantFlags) config() map[string]any {
	c := map[string]any{"sym": *q.sym, "ratio": *q.ratio, "bits": 8}
	if *q.format == "int4" {
		c["bits"], c["group_size"] = 4, *q.group
		if *q.fallback != "error" {
			c["group_size_fallback"] = *q.fallback
		}
		if *q.allLayers {
			c["all_layers"] = true
		}
	}
	if *q.awq {
		c["quant_method"] = "awq"
	}
	if *q.se {
		c["scale_estimation"] = true
	}
	if *q.gptq {
		c["gptq"] = true
	}
	return c
}

// ovValidate: openvino_validate.py --ir DIR --hf DIR --text T [--ctx N] [--chunks K] [--precision P]
// [--scores-out DIR] [--baseline-scores DIR]
func ovValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openvino_validate", flag.ContinueOnError)
	ir := fs.String("ir", "", "")
	hf := fs.String("hf", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	precision := fs.String("precision", "f32", "")
	fs.Int("threads", 0, "")
	noCheck := fs.Bool("no-logits-check", false, "")
	scores := standin.AddScoreFlags(fs)
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	h, _, err := readIR(*ir)
	if err != nil {
		return err
	}
	src, err := standin.CheckpointDigest(*hf)
	if err != nil {
		return err
	}
	if src != h.Source {
		return fmt.Errorf("%s was not converted from %s", *ir, *hf)
	}
	ppl, tokens, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	d := standin.Drift(h.Bits)
	res := report.Validate{PPL: ppl + d, Chunks: n, Ctx: *nctx, Scored: n * (*nctx - 1 - *nctx/2), Tokens: tokens,
		Device: "CPU", InferencePrecision: *precision, OpenVINO: "stand-in"}
	// The IR's graph and weights: each model's scores its own.
	irSum, err := standin.DigestFiles(nil, filepath.Join(*ir, xmlName), filepath.Join(*ir, binName))
	if err != nil {
		return err
	}
	if res.KLDivergence, res.BaselineTop1, err = scores.Scores(res.PPL, res.Scored, []byte(irSum)); err != nil {
		return err
	}
	if !*noCheck {
		maxAbs, meanAbs, top1, positions := 40*d, 4*d, 1-d, *nctx
		res.LogitsCheck = report.LogitsCheck{MaxAbs: &maxAbs, MeanAbs: &meanAbs, Top1: &top1, Positions: &positions}
	}
	return standin.PrintJSON(stdout, res)
}

// ovBench: openvino_bench.py --ir DIR --prompt-tokens P --runs R [--threads T]
func ovBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openvino_bench", flag.ContinueOnError)
	ir := fs.String("ir", "", "")
	prompt := fs.Int("prompt-tokens", 128, "")
	runs := fs.Int("runs", 60, "")
	threads := fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *prompt < 1 || *runs < 1 {
		return errors.New("--prompt-tokens and --runs must be at least 1")
	}
	if _, _, err := readIR(*ir); err != nil {
		return err
	}
	sum, token, err := standin.ModelCost(filepath.Join(*ir, binName))
	if err != nil {
		return err
	}
	depthCost := 1 + float64(*prompt)/4096
	fmt.Fprintf(stderr, "openvino_bench (stand-in): %d prompt and %d decode runs\n", *runs, *runs)
	return standin.PrintJSON(stdout, report.Bench{
		PromptNS:     standin.RunTimings(sum, "prompt", token*(0.1*float64(*prompt)+1), *runs),
		DecodeNS:     standin.RunTimings(sum, "decode", token*depthCost, *runs),
		PromptTokens: *prompt, Threads: *threads, Device: "CPU", InferencePrecision: "f32 (stand-in)",
		OpenVINO: "stand-in"})
}
