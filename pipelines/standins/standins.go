// Package standins registers every format family's stand-in tools with
// internal/standin: the test tier's replacements for the real converters,
// which read their real inputs and derive their outputs from them. Only
// tests, benchmarks and the standin command import it; a real run never
// picks a stand-in on its own.
package standins

import (
	_ "github.com/edgepipe/edgepipe/pipelines/coreml/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/gguf/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/llmcompressor/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/mlc/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/nvidia/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/openvino/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/qnn/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/shared/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/vision/standin"
)
