// Package mlc is the MLC format family (WebGPU / WebLLM): mlc_llm
// convert_weight, gen_config and optionally compile --device webgpu, with a
// structural check of the weight shards, tensor cache and config. mlc_llm is
// not on PyPI, so edgepipe does not install it and its steps were not run
// here (stand-ins in tests).
package mlc

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchain names where mlc_llm comes from: the user's own install, since
// its wheels come from MLC's own package index with a TVM build that
// matches them, so edgepipe cannot pin and install it from a lock.
const Toolchain = "mlc"

// Family is the MLC family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "mlc",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"mlc": "MLC"},
			Formats: []catalog.Format{
				{Name: "mlc-q4f16_1", Family: "mlc", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "partly",
					Note: "MLC weights, int4 with an fp16 scale per 32; the weights convert here, the WebGPU model library needs the MLC TVM toolchain and a WebGPU browser to run"},
			},
		},
		Options: func(string) any { return &Options{} },
		Expand:  expandMLC,
		Kinds:   []steps.Kind{mlcConvertWeight{}, mlcGenConfig{}, mlcCompile{}, mlcValidate{}},
		Toolchains: []toolchain.Spec{toolchain.External(Toolchain, []string{ToolMLCLLM},
			"not installed by edgepipe (mlc_llm is not on PyPI): install the nightly CPU wheels with "+
				"`pip install --pre -U -f https://mlc.ai/wheels mlc-llm-nightly-cpu mlc-ai-nightly-cpu` "+
				"(https://llm.mlc.ai/docs/install/mlc_llm.html), then put mlc_llm on PATH or pass --tool-path; "+
				"`mlc_llm compile --device webgpu` also needs emscripten and the MLC TVM web runtime")},
	}
}

// Options are an MLC target's with: options.
type Options struct {
	ConvTemplate *string `yaml:"conv_template" doc:"The conversation template mlc_llm gen_config writes (default chatml)."`
	Compile      bool    `yaml:"compile" doc:"Also compile the WebGPU model library (mlc_llm compile --device webgpu; needs the MLC TVM toolchain and emscripten)."`
}
