package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"

	"github.com/edgepipe/edgepipe/internal/standin"
	sharedstandin "github.com/edgepipe/edgepipe/pipelines/shared/standin"
)

func init() { standin.Tools["onnx_decode.py"] = onnxDecode }

// onnxDecode: onnx_decode.py --onnx MODEL --reference FILE [--threads N].
// Like the real script it refuses a graph without past key/values; its
// numbers are the shared decode stand-in's for the model file's bytes
// against the reference.
func onnxDecode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_decode", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	ref := fs.String("reference", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *ref == "" {
		return errors.New("usage: onnx_decode.py --onnx MODEL --reference FILE")
	}
	h, _, err := ReadONNX(*model)
	if err != nil {
		return err
	}
	if h.KVLayers == 0 {
		return errors.New("the graph has no past_key_values inputs: a decode through the KV cache needs a model exported with it (onnx-export with past: true)")
	}
	b, err := os.ReadFile(*model)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	rep, err := sharedstandin.DecodeReport(hex.EncodeToString(sum[:]), *ref,
		"ONNX Runtime (CPUExecutionProvider), the graph's past_key_values fed back from its present outputs")
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rep)
}
