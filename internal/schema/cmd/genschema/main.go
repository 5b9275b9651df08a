// Command genschema prints the JSON Schema of recipe format version 1:
//
//	go run ./internal/schema/cmd/genschema > docs/recipe.schema.json
package main

import (
	"fmt"
	"os"

	"github.com/edgepipe/edgepipe/internal/schema"
)

func main() {
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
