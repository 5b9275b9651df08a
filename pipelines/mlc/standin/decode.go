package standin

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	sharedstandin "github.com/edgepipe/edgepipe/pipelines/shared/standin"
)

func init() { standin.Tools["mlc_decode.py"] = mlcDecode }

// mlcDecode: mlc_decode.py --mlc DIR --model DIR --reference FILE
// [--threads N]. Like the real script it decodes the folder's shards
// (refusing a folder that is not an MLC one) into the checkpoint; its
// numbers are the shared decode stand-in's for the decoded tensors.
func mlcDecode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mlc_decode", flag.ContinueOnError)
	dir := fs.String("mlc", "", "")
	model := fs.String("model", "", "")
	ref := fs.String("reference", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *model == "" || *ref == "" {
		return errors.New("usage: mlc_decode.py --mlc DIR --model DIR --reference FILE")
	}
	if _, err := standin.CheckpointDigest(*model); err != nil {
		return err
	}
	d, _, err := DecodeFolder(*dir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	sort.Strings(names)
	var all strings.Builder
	for _, n := range names {
		all.WriteString(n + "=" + d[n] + "\n")
	}
	rep, err := sharedstandin.DecodeReport(all.String(), *ref, "the MLC shards dequantized in PyTorch, transformers' DynamicCache KV cache")
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rep)
}
