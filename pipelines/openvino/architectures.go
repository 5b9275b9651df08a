package openvino

import (
	_ "embed"
	"slices"

	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// exportArchitectures is the pinned optimum-intel's text-generation
// registry for OpenVINO (python/tests/test_openvino_architectures.py keeps
// it equal).
//
//go:embed architectures.txt
var exportArchitectures string

// refuses: optimum-intel exports the stateful text-generation model only
// for the architectures it registers; Gemma 3's multimodal checkpoint
// (gemma3) it exports only as image-text-to-text.
func refuses(_, arch string) string {
	if slices.Contains(shared.ArchitectureNames(exportArchitectures), arch) {
		return ""
	}
	why := "optimum-intel 2.2.0, which exports the OpenVINO model, has no stateful text-generation export for model_type " + arch
	if arch == "gemma3" {
		why += " (it exports Gemma 3's multimodal checkpoint as image-text-to-text only: use the text model, gemma3_text)"
	}
	return why
}
