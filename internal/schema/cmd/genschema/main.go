// Command genschema prints the JSON Schema of recipe format version 1,
// or with -options the Markdown reference of every format's with: keys:
//
//	go run ./internal/schema/cmd/genschema > docs/recipe.schema.json
//	go run ./internal/schema/cmd/genschema -options > docs/format-options.md
package main

import (
	"fmt"
	"os"

	"github.com/edgepipe/edgepipe/internal/schema"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-options" {
		if _, err := os.Stdout.Write(schema.FormatOptions()); err != nil {
			fmt.Fprintf(os.Stderr, "genschema: %v\n", err)
			os.Exit(1)
		}
		return
	}
	b, err := schema.Generate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "genschema: %v\n", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(b); err != nil {
		fmt.Fprintf(os.Stderr, "genschema: %v\n", err)
		os.Exit(1)
	}
}
