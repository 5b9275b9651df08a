package edge

import (
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/recipewrite"
)

// SchemaComment is the first line of a recipe written into a checkout's
// recipes/ folder: editors with the YAML language server validate and
// complete the file from it. SchemaLine gives it for any place.
const SchemaComment = "# yaml-language-server: $schema=../docs/recipe.schema.json"

// SchemaLine is the modeline for a recipe written at path: the schema of
// the checkout it is in (the nearest docs/recipe.schema.json above it),
// relative to the recipe's folder, else the schema's $id URL.
func SchemaLine(path string) string {
	ref := recipe.SchemaID
	if abs, err := filepath.Abs(path); err == nil {
		dir := filepath.Dir(abs)
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(recipe.SchemaFile))); err == nil {
				if rel, err := filepath.Rel(dir, filepath.Join(d, filepath.FromSlash(recipe.SchemaFile))); err == nil {
					ref = filepath.ToSlash(rel)
				}
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "# yaml-language-server: $schema=" + ref
}

// RecipeOptions are what a written recipe needs beyond the pick.
type RecipeOptions struct {
	Name string
	// Source is model.source as the recipe must say it (a local folder
	// relative to the recipe's own folder).
	Source string
	// Command is the command line that wrote it, for the header.
	Command string
	// SchemaLine is the modeline (default SchemaComment).
	SchemaLine string
}

// RenderRecipe writes the pick as a recipe in format version 1, one target,
// with the reasons and warnings as comments so the file explains itself.
func RenderRecipe(p Pick, o RecipeOptions) []byte { return RenderRecipes([]Pick{p}, o) }

// RenderRecipes writes one recipe with a target per pick (one model for
// several platforms), each target named after its platform and explained
// in the header.
func RenderRecipes(picks []Pick, o RecipeOptions) []byte {
	header := headerPrelude(o)
	platforms := make([]string, len(picks))
	r := &recipe.Recipe{Edgepipe: recipe.FormatVersion, Name: o.Name,
		Model: recipe.Model{Source: o.Source},
		Quality: recipe.Quality{Perplexity: recipe.PerplexityGate{Context: recipe.DefaultPPLContext,
			WarnDelta: recipe.DefaultWarnDelta, MaxDelta: recipe.DefaultMaxDelta}},
	}
	for i, p := range picks {
		choice := fmt.Sprintf("%s on %s (%s):", p.Format, p.Device, p.DeviceName)
		if len(picks) > 1 {
			choice = fmt.Sprintf("%s: %s", p.Platform, choice)
		}
		header = append(header, choiceLines(choice, p.Reasons, p.Warnings)...)
		platforms[i] = fmt.Sprintf("%s, %s on %s", p.Summary, p.Format, p.Device)
		t := recipe.Target{Name: p.Platform, Device: p.Device, Format: p.Format, Context: p.Context,
			KVDtype: p.KVDtype, MinTokensPerS: p.MinTokensPerS, MaxMemoryGB: p.MaxMemoryGB}
		t.Quality = r.Quality
		r.Targets = append(r.Targets, t)
	}
	r.Description = fmt.Sprintf("%s for %s", o.Source, strings.Join(platforms, "; "))
	return recipewrite.Write(r, header)
}

// pickHeader is a written recipe's comment header (lines without "# "):
// the schema modeline, the command that wrote it, the choice and its
// reasons and warnings, so the file explains itself.
func pickHeader(o RecipeOptions, choice string, reasons, warnings []string) []string {
	return append(headerPrelude(o), choiceLines(choice, reasons, warnings)...)
}

// headerPrelude is the schema modeline and the command that wrote it.
func headerPrelude(o RecipeOptions) []string {
	line := o.SchemaLine
	if line == "" {
		line = SchemaComment
	}
	header := []string{strings.TrimPrefix(line, "# ")}
	if o.Command != "" {
		header = append(header, fmt.Sprintf("Written by `%s`.", o.Command))
	}
	return header
}

// choiceLines explain one choice: what was chosen, why, and its warnings.
func choiceLines(choice string, reasons, warnings []string) []string {
	header := []string{choice}
	for _, r := range reasons {
		header = append(header, wrap("  - ", r)...)
	}
	if len(warnings) > 0 {
		header = append(header, "Warnings when it was written:")
		for _, w := range warnings {
			header = append(header, wrap("  - ", w)...)
		}
	}
	return header
}

// wrap breaks text into comment lines of at most about 80 columns, the
// first led by lead, the rest indented as far.
func wrap(lead, text string) []string {
	const width = 76
	var out []string
	cur := lead
	for _, w := range strings.Fields(text) {
		if len(cur) > len(lead) && len(cur)+1+len(w) > width {
			out = append(out, cur)
			cur = strings.Repeat(" ", len(lead))
		}
		if len(cur) > len(lead) && !strings.HasSuffix(cur, " ") {
			cur += " "
		}
		cur += w
	}
	return append(out, cur)
}

var nameInvalid = regexp.MustCompile(`[^a-z0-9._-]+`)

// RecipeName makes a recipe name ([a-z0-9][a-z0-9._-]*) from a file name.
func RecipeName(base string) string {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml"))
	n = nameInvalid.ReplaceAllString(n, "-")
	n = strings.TrimLeft(n, "._-")
	if len(n) > 64 {
		n = n[:64]
	}
	if n == "" {
		return "model"
	}
	return n
}

// SourceFromRecipe rewrites a local model folder relative to the recipe's
// folder, which is what recipes resolve it against.
func SourceFromRecipe(source, recipePath string) (string, error) {
	if !shared.IsLocalSource(source) || filepath.IsAbs(source) {
		return source, nil
	}
	absSrc, err := filepath.Abs(source)
	if err != nil {
		return "", err
	}
	absDir, err := filepath.Abs(filepath.Dir(recipePath))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absDir, absSrc)
	if err != nil {
		return absSrc, nil
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, ".") {
		rel = "./" + rel
	}
	return rel, nil
}
