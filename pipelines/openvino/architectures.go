package openvino

import (
	_ "embed"

	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// exportArchitectures is the pinned optimum-intel's text-generation
// registry for OpenVINO (python/tests/test_openvino_architectures.py keeps
// it equal).
//
//go:embed architectures.txt
var exportArchitecturesList string

var exportArchitectures = shared.ParseRegistry(exportArchitecturesList)

// refuses: optimum-intel exports the stateful text-generation model only
// for the architectures it registers for the transformers installed beside
// it; Gemma 3's multimodal checkpoint (gemma3) it exports only as
// image-text-to-text.
func refuses(_, arch string) string {
	if exportArchitectures.Has(arch) {
		return ""
	}
	why := exportArchitectures.Pinned + " (the openvino toolchain's) cannot export model_type " + arch +
		" as a stateful text-generation model (not registered, or registered for other transformers versions)"
	switch arch {
	case "gemma3_text":
		why = "Gemma 3's OpenVINO export allows transformers up to 5.0, and the openvino toolchain pins " + exportArchitectures.Pinned + " (its export stops with \"does not allow for the export of the model\")"
	case "gemma3":
		why += " (it exports Gemma 3's multimodal checkpoint as image-text-to-text only: use the text model, gemma3_text)"
	}
	return why
}
