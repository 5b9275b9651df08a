// Command edgepipe converts models for edge devices from a declarative
// recipe. All logic lives in internal/cli and the packages it wires.
package main

import (
	"os"

	"github.com/edgepipe/edgepipe/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:]))
}
