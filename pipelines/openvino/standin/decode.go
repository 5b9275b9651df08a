package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"

	"github.com/edgepipe/edgepipe/internal/standin"
	sharedstandin "github.com/edgepipe/edgepipe/pipelines/shared/standin"
)

func init() { standin.Tools["openvino_decode.py"] = ovDecode }

// ovDecode: openvino_decode.py --ir DIR --reference FILE [--threads N].
// Like the real script it needs an IR (the stand-in's, stateful by
// construction); its numbers are the shared decode stand-in's for the
// IR's header and weights against the reference.
func ovDecode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openvino_decode", flag.ContinueOnError)
	ir := fs.String("ir", "", "")
	ref := fs.String("reference", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *ir == "" || *ref == "" {
		return errors.New("usage: openvino_decode.py --ir DIR --reference FILE")
	}
	h, weights, err := readIR(*ir)
	if err != nil {
		return err
	}
	meta, err := json.Marshal(h)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(append(meta, weights...))
	rep, err := sharedstandin.DecodeReport(hex.EncodeToString(sum[:]), *ref,
		"OpenVINO CPU plugin (f32, KV cache f32), the stateful IR's KV cache")
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rep)
}
