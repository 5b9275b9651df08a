// Package gguf is the GGUF format family: llama.cpp's convert_hf_to_gguf.py
// makes one F16 GGUF per recipe, llama-quantize makes each type from it
// (with an importance matrix from llama-imatrix when asked), and
// llama-perplexity gates every type against the F16 model on the same
// tokens, with KL divergence and top-1 agreement. llama-bench times the
// results on this host.
package gguf

import (
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/steps"
)

// Step ids of the GGUF pipeline's shared part.
const (
	F16StepID      = "gguf-convert:f16"
	BaselineStepID = "perplexity:baseline"
)

// Family is the GGUF family, for registration.
func Family() plan.Family {
	formats := make([]catalog.Format, 0, len(ggufTypes))
	for _, t := range ggufTypes {
		formats = append(formats, ggufFormat(t))
	}
	return plan.Family{
		Name: "gguf",
		Formats: catalog.FormatSet{
			Labels:  map[string]string{"gguf": "GGUF"},
			Summary: "gguf-<llama.cpp type> (gguf-q4_k_m, gguf-q8_0, gguf-f16, ...)",
			Aliases: aliases,
			Formats: formats,
		},
		Options: func(string) any { return &Options{} },
		Expand:  expandGGUF,
		Kinds:   []steps.Kind{ggufConvert{}, ggufQuantize{}, imatrix{}, perplexity{}, comparePerplexity{}},
		Bench:   llamaBench{},
		// One .gguf file, which llama.cpp and every app load by any name.
		NamedArtifact: func(string) bool { return true },
	}
}

// llama3_8BParams converts llama-quantize's file sizes (GiB, measured on
// Llama-3-8B) into bits per weight: 8,030,261,248 parameters.
const llama3_8BParams = 8030261248

// ggufType is one row of llama.cpp's tools/quantize/quantize.cpp QUANT_OPTIONS
// table. That table gives either a Llama-3-8B file size in GiB or a bits per
// weight figure; the size includes the embedding and output tensors llama.cpp
// keeps at higher precision, which is what a size estimate wants.
type ggufType struct {
	name       string
	llama3GiB  float64 // from QUANT_OPTIONS, "4.58G, +0.1754 ppl @ Llama-3-8B"
	bpw        float64 // from QUANT_OPTIONS where it quotes bpw, or exact for float types
	block      int
	needsImat  bool
	recommends string
}

// ggufTypes in llama-quantize's order within each precision, most bits first.
var ggufTypes = []ggufType{
	{name: "F32", bpw: 32},
	{name: "F16", bpw: 16},
	{name: "BF16", bpw: 16},
	{name: "Q8_0", llama3GiB: 7.96, block: 32},
	{name: "Q6_K", llama3GiB: 6.14, block: 256},
	{name: "Q5_K_M", llama3GiB: 5.33, block: 256},
	{name: "Q5_K_S", llama3GiB: 5.21, block: 256},
	{name: "Q5_1", llama3GiB: 5.65, block: 32},
	{name: "Q5_0", llama3GiB: 5.21, block: 32},
	{name: "Q4_K_M", llama3GiB: 4.58, block: 256, recommends: "CPU and Apple Silicon laptops (platform guide)"},
	{name: "Q4_K_S", llama3GiB: 4.37, block: 256},
	{name: "Q4_1", llama3GiB: 4.78, block: 32},
	{name: "Q4_0", llama3GiB: 4.34, block: 32},
	{name: "IQ4_NL", bpw: 4.50, block: 32},
	{name: "IQ4_XS", bpw: 4.25, block: 256},
	{name: "Q3_K_L", llama3GiB: 4.03, block: 256},
	{name: "Q3_K_M", llama3GiB: 3.74, block: 256},
	{name: "Q3_K_S", llama3GiB: 3.41, block: 256},
	{name: "IQ3_M", bpw: 3.66, block: 256},
	{name: "IQ3_S", bpw: 3.44, block: 256},
	{name: "IQ3_XS", bpw: 3.3, block: 256},
	{name: "IQ3_XXS", bpw: 3.06, block: 256},
	{name: "Q2_K", llama3GiB: 2.96, block: 256},
	{name: "Q2_K_S", llama3GiB: 2.96, block: 256, needsImat: true},
	{name: "IQ2_M", bpw: 2.7, block: 256},
	{name: "IQ2_S", bpw: 2.5, block: 256, needsImat: true},
	{name: "IQ2_XS", bpw: 2.31, block: 256, needsImat: true},
	{name: "IQ2_XXS", bpw: 2.06, block: 256, needsImat: true},
	{name: "IQ1_M", bpw: 1.75, block: 256, needsImat: true},
	{name: "IQ1_S", bpw: 1.56, block: 256, needsImat: true},
}

// aliases are llama-quantize's own aliases; a recipe must spell the full
// name so the format string, and with it the cache key, has one spelling.
var aliases = map[string]string{
	"gguf-q3_k": "gguf-q3_k_m",
	"gguf-q4_k": "gguf-q4_k_m",
	"gguf-q5_k": "gguf-q5_k_m",
}

func ggufFormat(t ggufType) catalog.Format {
	bpw := t.bpw
	if t.llama3GiB > 0 {
		bpw = t.llama3GiB * (1 << 30) * 8 / llama3_8BParams
	}
	note := "llama.cpp convert + llama-quantize + llama-perplexity all run on the CPU"
	if t.recommends != "" {
		note = "recommended for " + t.recommends + "; " + note
	}
	return catalog.Format{
		Name:          "gguf-" + strings.ToLower(t.name),
		Family:        "gguf",
		GGUFType:      t.name,
		BitsPerWeight: round2(bpw),
		BlockSize:     t.block,
		NeedsImatrix:  t.needsImat,
		RunsHere:      "yes",
		Bench:         "llama.cpp",
		Note:          note,
	}
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// Options are a GGUF target's with: options.
type Options struct {
	Imatrix bool `yaml:"imatrix" doc:"Quantize with an importance matrix computed by llama-imatrix on the recipe's calibration text (needed for the IQ types and Q2_K_S; it lowers the loss of every low-bit type)."`
}
