package edge

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// SchemaComment is the first line of every recipe edgepipe writes: editors
// with the YAML language server validate and complete the file from it.
const SchemaComment = "# yaml-language-server: $schema=../docs/recipe.schema.json"

// RecipeOptions are what a written recipe needs beyond the pick.
type RecipeOptions struct {
	Name string
	// Source is model.source as the recipe must say it (a local folder
	// relative to the recipe's own folder).
	Source string
	// Command is the command line that wrote it, for the header.
	Command string
}

// RenderRecipe writes the pick as a recipe in format version 1, one target,
// with the reasons and warnings as comments so the file explains itself.
func RenderRecipe(p Pick, o RecipeOptions) []byte {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("%s", SchemaComment)
	if o.Command != "" {
		line("# Written by `%s`.", o.Command)
	}
	line("# %s on %s (%s):", p.Format, p.Device, p.DeviceName)
	for _, r := range p.Reasons {
		comment(&b, "  - ", r)
	}
	if len(p.Warnings) > 0 {
		line("# Warnings when it was written:")
		for _, w := range p.Warnings {
			comment(&b, "  - ", w)
		}
	}
	line("edgepipe: 1")
	line("name: %s", o.Name)
	line("description: %s", yamlString(fmt.Sprintf("%s for %s, %s on %s", o.Source, p.Summary, p.Format, p.Device)))
	line("")
	line("model:")
	line("  source: %s", yamlString(o.Source))
	line("")
	line("targets:")
	line("  %s:", p.Platform)
	line("    device: %s", p.Device)
	line("    format: %s", p.Format)
	line("    context: %d", p.Context)
	line("    kv_dtype: %s", p.KVDtype)
	if p.MinTokensPerS > 0 {
		line("    min_tokens_per_s: %s", strconv.FormatFloat(p.MinTokensPerS, 'g', -1, 64))
	}
	if p.MaxMemoryGB > 0 {
		line("    max_memory_gb: %s", strconv.FormatFloat(p.MaxMemoryGB, 'g', -1, 64))
	}
	return []byte(b.String())
}

// comment writes text as YAML comment lines of at most about 80 columns.
func comment(b *strings.Builder, lead, text string) {
	const width = 78
	prefix := "#" + lead
	cur := prefix
	for _, w := range strings.Fields(text) {
		if len(cur) > len(prefix) && len(cur)+1+len(w) > width {
			b.WriteString(cur + "\n")
			cur = "#" + strings.Repeat(" ", len(lead))
		}
		if len(cur) > len(prefix) && !strings.HasSuffix(cur, " ") {
			cur += " "
		}
		cur += w
	}
	b.WriteString(cur + "\n")
}

var plainScalar = regexp.MustCompile(`^[A-Za-z0-9./][A-Za-z0-9._/+@-]*(:[A-Za-z0-9._/+@-]+)*$`)

// yamlString writes s plain when YAML reads it back unchanged as a string,
// else double-quoted (a JSON string is a valid YAML double-quoted scalar).
func yamlString(s string) string {
	_, numErr := strconv.ParseFloat(s, 64)
	if plainScalar.MatchString(s) && !reservedPlain[strings.ToLower(s)] && numErr != nil {
		return s
	}
	q, _ := json.Marshal(s)
	return string(q)
}

// reservedPlain are plain scalars YAML would read as something other than a
// string.
var reservedPlain = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "null": true, "~": true}

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
