// Package pylib is the Python library edgepipe's helper scripts share:
// perplexity scoring in llama-perplexity's scheme (ppl_scoring.py), the
// logits comparison of exported models (logits_check.py), image sets and
// models for the vision helpers (vision_data.py), and the step's
// environment: its thread grant and offline mode (edgepipe_threads.py).
// Importing this package registers the files with the toolchain layer,
// which writes them beside every helper.
package pylib

import (
	"embed"

	"github.com/edgepipe/edgepipe/internal/toolchain"
)

//go:embed *.py
var files embed.FS

func init() { toolchain.RegisterHelpers("pipelines/pylib", files) }
