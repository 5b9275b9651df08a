package schema

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

//go:generate sh -c "go run ./cmd/genschema -options > ../../docs/format-options.md"

// RegenerateOptionsCommand rewrites docs/format-options.md.
const RegenerateOptionsCommand = "go run ./internal/schema/cmd/genschema -options > docs/format-options.md"

// FormatOptions is the reference of every format's `with:` options in
// Markdown, from the same typed options the parser decodes and the
// schema describes: formats that share an options type share a section.
func FormatOptions() []byte {
	type section struct {
		formats []string
		fields  []recipe.OptionField
	}
	var sections []*section
	byKey := map[string]*section{}
	var none []string
	for _, f := range catalog.Formats() {
		var key string
		var fields []recipe.OptionField
		seen := map[string]bool{}
		for _, o := range []any{plan.Catalog{}.Options(f.Name), plan.Catalog{}.TaskOptions(recipe.TaskImageClassification, f.Name)} {
			if o == nil {
				continue
			}
			key += reflect.TypeOf(o).String() + ";"
			for _, fd := range recipe.OptionFields(o) {
				if !seen[fd.Key] { // the text family's where both have a key
					seen[fd.Key] = true
					fields = append(fields, fd)
				}
			}
		}
		if key == "" {
			none = append(none, f.Name)
			continue
		}
		s, ok := byKey[key]
		if !ok {
			s = &section{fields: fields}
			byKey[key] = s
			sections = append(sections, s)
		}
		s.formats = append(s.formats, f.Name)
	}
	var b bytes.Buffer
	b.WriteString("# Format options (`with:`)\n\n")
	b.WriteString("<!-- Generated from the formats' typed options by `" + RegenerateOptionsCommand + "`\n")
	b.WriteString("     (or go generate ./internal/schema); internal/schema's TestFormatOptionsCurrent fails when it is out of date. -->\n\n")
	b.WriteString("A target's `with:` sets options of its format; `validate` refuses a key its format does not take, at\n")
	b.WriteString("its FILE:LINE:COL. The same options are in [recipe.schema.json](recipe.schema.json) for editors;\n")
	b.WriteString("the recipe's other keys are in [recipe.md](recipe.md).\n\n")
	for _, s := range sections {
		names := make([]string, len(s.formats))
		for i, f := range s.formats {
			names[i] = "`" + f + "`"
		}
		fmt.Fprintf(&b, "## %s\n\n", strings.Join(names, ", "))
		b.WriteString("| key | type | values | description |\n|---|---|---|---|\n")
		for _, fd := range s.fields {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", fd.Key, optionType(fd.Type), optionValues(fd), cell(fd.Doc))
		}
		b.WriteString("\n")
	}
	if len(none) > 0 {
		names := make([]string, len(none))
		for i, f := range none {
			names[i] = "`" + f + "`"
		}
		fmt.Fprintf(&b, "## Formats without options\n\n%s take no `with:` keys.\n", strings.Join(names, ", "))
	}
	return b.Bytes()
}

func optionType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Float64, reflect.Float32:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "list of " + optionType(t.Elem())
	}
	return t.Kind().String()
}

func optionValues(fd recipe.OptionField) string {
	switch {
	case len(fd.Enum) > 0:
		vals := make([]string, len(fd.Enum))
		for i, e := range fd.Enum {
			vals[i] = "`" + e + "`"
		}
		return strings.Join(vals, ", ")
	case fd.Min != nil:
		return "at least " + ftoa(*fd.Min)
	}
	return ""
}

// cell keeps a description on one table row.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
}
