// Package pipelines holds edgepipe's format families, one package each
// (gguf, onnx, qnn, coreml, mlc, llmcompressor, nvidia, openvino), and registers them:
// importing it is what makes their formats, step kinds and toolchains known
// to the catalog, the planner, the executor and the installer.
//
// A new family is a folder beside these: a package with a Family() value
// (its catalog rows, typed with: options, expander, step kinds, tool names,
// toolchain specs and helper scripts), its Python helpers under python/,
// its lock file, its stand-ins under standin/, a recipe and tests; and one
// line below. The kinds every family shares (fetch, the transformers
// baseline, bench, run) are in shared/, the Python every helper imports in
// pylib/.
package pipelines

import (
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/pipelines/coreml"
	"github.com/edgepipe/edgepipe/pipelines/gguf"
	"github.com/edgepipe/edgepipe/pipelines/llmcompressor"
	"github.com/edgepipe/edgepipe/pipelines/mlc"
	"github.com/edgepipe/edgepipe/pipelines/nvidia"
	"github.com/edgepipe/edgepipe/pipelines/onnx"
	"github.com/edgepipe/edgepipe/pipelines/openvino"
	"github.com/edgepipe/edgepipe/pipelines/qnn"
	"github.com/edgepipe/edgepipe/pipelines/vision"
)

// The order is the order formats are listed in (the catalog, error
// messages, `edgepipe devices`).
func init() {
	plan.Register(coreml.Family(), qnn.Family(), mlc.Family(), gguf.Family(), onnx.Family(),
		llmcompressor.Family(), nvidia.Family(), openvino.Family(), vision.Family())
}
