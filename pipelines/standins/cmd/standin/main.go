// Command standin is a multi-call binary: linked or copied under a tool's
// name (llama-quantize, llama-perplexity, ...) it acts as that tool's
// stand-in. Tests and benchmarks use it; it is never a real conversion.
package main

import (
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/standins" // every family's stand-ins
)

func main() {
	os.Exit(standin.Main(filepath.Base(os.Args[0]), os.Args[1:]))
}
