// Command gencli prints edgepipe's CLI reference, generated from the
// command tree:
//
//	go run ./internal/cli/cmd/gencli > docs/cli-commands.md
//
// (or go generate ./internal/cli).
package main

import (
	"fmt"
	"os"

	"github.com/edgepipe/edgepipe/internal/cli"
)

func main() {
	if err := cli.WriteCommandReference(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "gencli: %v\n", err)
		os.Exit(1)
	}
}
