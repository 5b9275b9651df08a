// Package schema generates the JSON Schema (draft 2020-12) of recipe format
// version 1 from the Go types in pipelines, so editors running
// yaml-language-server complete and check recipes as they are typed.
//
// The structure comes from reflecting over recipe.Recipe and the types it
// holds (their json tags are the recipe keys); what reflection cannot know
// (descriptions, bounds, defaults, which values are names) comes from the
// tables in docs.go. Generate fails when a recipe field has no entry there,
// so a new key cannot reach the schema undocumented.
//
// docs/recipe.schema.json is this package's output, committed; its test
// fails when the two differ.
package schema

//go:generate sh -c "go run ./cmd/genschema > ../../docs/recipe.schema.json"

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	_ "github.com/edgepipe/edgepipe/pipelines" // the formats and their options

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// Draft is the JSON Schema dialect the schema is written in.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// RegenerateCommand rewrites the committed schema; error messages name it.
const RegenerateCommand = "go run ./internal/schema/cmd/genschema > docs/recipe.schema.json"

// Schema is the subset of JSON Schema 2020-12 the recipe schema uses. The
// field order is the order keywords appear in the output.
type Schema struct {
	Schema            string             `json:"$schema,omitempty"`
	ID                string             `json:"$id,omitempty"`
	Ref               string             `json:"$ref,omitempty"`
	Title             string             `json:"title,omitempty"`
	Description       string             `json:"description,omitempty"`
	Type              any                `json:"type,omitempty"` // a name, or a list of names
	Const             any                `json:"const,omitempty"`
	Enum              []any              `json:"enum,omitempty"`
	Pattern           string             `json:"pattern,omitempty"`
	MaxLength         *int               `json:"maxLength,omitempty"`
	Minimum           *float64           `json:"minimum,omitempty"`
	ExclusiveMinimum  *float64           `json:"exclusiveMinimum,omitempty"`
	Default           any                `json:"default,omitempty"`
	Examples          []any              `json:"examples,omitempty"`
	AnyOf             []*Schema          `json:"anyOf,omitempty"`
	AllOf             []*Schema          `json:"allOf,omitempty"`
	If                *Schema            `json:"if,omitempty"`
	Then              *Schema            `json:"then,omitempty"`
	Required          []string           `json:"required,omitempty"`
	Properties        map[string]*Schema `json:"properties,omitempty"`
	PatternProperties map[string]*Schema `json:"patternProperties,omitempty"`
	PropertyNames     *Schema            `json:"propertyNames,omitempty"`
	MinProperties     *int               `json:"minProperties,omitempty"`
	MaxProperties     *int               `json:"maxProperties,omitempty"`
	// AdditionalProperties is false, or a schema for the values of keys
	// not listed; nil allows any.
	AdditionalProperties any                `json:"additionalProperties,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	Defs                 map[string]*Schema `json:"$defs,omitempty"`
}

// Patterns the parser enforces on names (pipelines/parse.go: nameRE,
// overrideIDRE): names become folder names.
const (
	NamePattern       = `^[a-z0-9][a-z0-9._-]*$`
	OverrideIDPattern = `^[a-z0-9][a-z0-9._-]*:[a-z0-9._:@+-]*$`
	// ExtensionPattern matches the top-level keys the parser ignores.
	ExtensionPattern = `^x-`
)

// Generate returns the schema as indented JSON with a final newline.
func Generate() ([]byte, error) {
	s, err := Build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encode the recipe schema: %w", err)
	}
	return buf.Bytes(), nil
}

// Build reflects over recipe.Recipe and returns the schema.
func Build() (*Schema, error) {
	g := &generator{defs: map[string]*Schema{}, used: map[string]bool{}}
	root := g.object(reflect.TypeOf(recipe.Recipe{}))
	if len(g.errs) > 0 {
		return nil, fmt.Errorf("the recipe schema is missing documentation; add it to internal/schema/docs.go:\n  %s", strings.Join(g.errs, "\n  "))
	}
	var stale []string
	for k := range fieldDocs {
		if !g.used[k] {
			stale = append(stale, k)
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		return nil, fmt.Errorf("internal/schema/docs.go documents fields recipe.Recipe no longer has: %s; remove them", strings.Join(stale, ", "))
	}
	if t := g.defs["target"]; t != nil {
		t.AllOf = optionSchemas()
	}
	root.Schema = Draft
	root.ID = recipe.SchemaID
	root.Title = "edgepipe recipe, format version 1"
	// Top-level x- keys are ignored by the parser: a place for anchors.
	root.PatternProperties = map[string]*Schema{
		ExtensionPattern: {Description: "Ignored by edgepipe: a place to define YAML anchors that targets merge with <<: *name."},
	}
	root.Defs = g.defs
	return root, nil
}

type generator struct {
	defs map[string]*Schema
	used map[string]bool
	errs []string
}

// object is the schema of a struct: one property per json-tagged field, no
// others (the parser rejects unknown keys everywhere).
func (g *generator) object(t reflect.Type) *Schema {
	doc, ok := typeDocs[t.Name()]
	if !ok {
		g.errs = append(g.errs, fmt.Sprintf("typeDocs[%q]: what a %s is", t.Name(), t.Name()))
	}
	s := &Schema{Description: doc, Type: "object", Properties: map[string]*Schema{}, AdditionalProperties: false}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		id := t.Name() + "." + f.Name
		fd, ok := fieldDocs[id]
		g.used[id] = true
		if !ok {
			g.errs = append(g.errs, fmt.Sprintf("fieldDocs[%q]: what %s: means in a recipe", id, name))
			continue
		}
		if fd.Key {
			continue // written as the key of the entry, not inside it
		}
		p := g.field(f.Type, fd)
		s.Properties[name] = p
		if fd.Required {
			s.Required = append(s.Required, name)
		}
	}
	return s
}

// field is the schema of one field's value.
func (g *generator) field(t reflect.Type, fd fieldDoc) *Schema {
	if t.Kind() == reflect.Pointer {
		t = t.Elem() // an optional section: absent is the nil pointer
	}
	var s *Schema
	switch {
	case fd.Schema != nil:
		s = fd.Schema()
	case t.Kind() == reflect.Struct:
		s = &Schema{Ref: g.def(t)}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		// Targets and steps are written as a mapping from name to settings.
		s = &Schema{Type: "object", AdditionalProperties: &Schema{Ref: g.def(t.Elem())}}
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		s = &Schema{Type: "object", AdditionalProperties: &Schema{Ref: g.def(t.Elem())}}
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface:
		s = &Schema{Type: "object"} // format options: any values
	case t.Kind() == reflect.Map:
		s = &Schema{Type: "object", AdditionalProperties: scalar(t.Elem())}
	case t.Kind() == reflect.Slice:
		s = &Schema{Type: "array", Items: scalar(t.Elem())}
	default:
		s = scalar(t)
	}
	if fd.Shape != nil {
		fd.Shape(s)
	}
	s.Description = fd.Desc
	if fd.Default != nil {
		s.Default = fd.Default
	}
	s.Examples = fd.Examples
	if fd.Min != nil {
		s.Minimum = fd.Min
	}
	if fd.Nullable {
		s = nullable(s)
	}
	return s
}

// def adds the struct's schema to $defs once and returns its reference.
func (g *generator) def(t reflect.Type) string {
	name := defName(t.Name())
	if _, done := g.defs[name]; !done {
		g.defs[name] = nil // a placeholder against recursion
		g.defs[name] = g.object(t)
	}
	return "#/$defs/" + name
}

// defNames names the $defs whose Go type name is not the recipe's word.
var defNames = map[string]string{"StepSpec": "step", "ToolchainOverride": "toolchain", "PerplexityGate": "perplexity"}

// defName turns a Go type name into a $defs key: PerplexityGate ->
// perplexity_gate.
func defName(goName string) string {
	if n, ok := defNames[goName]; ok {
		return n
	}
	var b strings.Builder
	for i, c := range goName {
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

func scalar(t reflect.Type) *Schema {
	switch t.Kind() {
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return &Schema{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	}
	return &Schema{}
}

// nullable also accepts an empty value (key: with nothing after it), which
// the parser reads as "use the defaults". Keywords that describe the key
// stay on the outside, where editors look for them.
func nullable(s *Schema) *Schema {
	if name, ok := s.Type.(string); ok && s.Ref == "" {
		s.Type = []string{name, "null"}
		return s
	}
	out := &Schema{Description: s.Description, Default: s.Default, Examples: s.Examples}
	s.Description, s.Default, s.Examples = "", nil, nil
	out.AnyOf = []*Schema{s, {Type: "null"}}
	return out
}

func ptr[T any](v T) *T { return &v }

// nameSchema is a recipe, target or step name.
func nameSchema() *Schema {
	return &Schema{Type: "string", Pattern: NamePattern, MaxLength: ptr(recipe.MaxNameLen)}
}

// formatSchema lists every format: the GGUF types as one pattern (one per
// llama.cpp quantization type), the rest by name.
func formatSchema() *Schema {
	var names []any
	var gguf []string
	for _, f := range catalog.Formats() {
		if f.Family == "gguf" {
			gguf = append(gguf, strings.TrimPrefix(f.Name, "gguf-"))
			continue
		}
		names = append(names, f.Name)
	}
	return &Schema{Type: "string", AnyOf: []*Schema{
		{Enum: names},
		{Pattern: "^gguf-(" + strings.Join(gguf, "|") + ")$",
			Description: "a llama.cpp GGUF type, lowercase: gguf-q4_k_m, gguf-q8_0, gguf-f16, ...",
			// Editors offer examples as completions; these are the common ones.
			Examples: []any{"gguf-q4_k_m", "gguf-q5_k_m", "gguf-q8_0", "gguf-q4_0", "gguf-f16"}},
	}}
}

// deviceSchema lists device ids and their aliases, which recipes may use too.
func deviceSchema() *Schema {
	var ids []any
	for _, d := range catalog.Devices() {
		ids = append(ids, d.ID)
		for _, a := range d.Aliases {
			ids = append(ids, a)
		}
	}
	return &Schema{Type: "string", Enum: ids}
}

func kvDtypeSchema() *Schema {
	var e []any
	for _, k := range recipe.KVDtypes {
		e = append(e, k)
	}
	return &Schema{Type: "string", Enum: e}
}

// DestinationPattern is the start of a publish destination the parser
// accepts (internal/remote.Parse checks the rest).
const DestinationPattern = `^(oci://|s3::https?://)`

// publishSchema is a target's publish: list: destination strings, or
// {url, insecure} for a registry reached over plain HTTP.
func publishSchema() *Schema {
	dest := &Schema{Type: "string", Pattern: DestinationPattern}
	return &Schema{Type: "array", Items: &Schema{AnyOf: []*Schema{
		dest,
		{Type: "object", Required: []string{"url"}, AdditionalProperties: false, Properties: map[string]*Schema{
			"url":      {Description: "The destination: oci://HOST[:PORT]/REPOSITORY[:TAG] or s3::https://HOST/BUCKET/PREFIX.", Type: "string", Pattern: DestinationPattern},
			"insecure": {Description: "Allow plain HTTP to this destination although it is not on localhost (a trusted network only).", Type: "boolean", Default: false},
		}},
	}}}
}

// optionSchemas ties each format to its family's typed with: options: one
// if/then per options type, so an editor rejects the same typos the parser
// does (recipe.DecodeOptions reads the same struct tags).
func optionSchemas() []*Schema {
	type group struct {
		formats []any
		opts    []any
	}
	var groups []*group
	byTypes := map[string]*group{}
	var none []any
	for _, f := range catalog.Formats() {
		// A format name an image-classification family shares with a text
		// one (openvino-int8) takes either's options: the schema sees the
		// target, not the recipe's task, so it allows both sets (the text
		// family's definition where both have a key).
		var opts []any
		for _, o := range []any{plan.Catalog{}.Options(f.Name), plan.Catalog{}.TaskOptions(recipe.TaskImageClassification, f.Name)} {
			if o != nil {
				opts = append(opts, o)
			}
		}
		if len(opts) == 0 {
			none = append(none, f.Name)
			continue
		}
		var key string
		for _, o := range opts {
			key += reflect.TypeOf(o).String() + ";"
		}
		g, ok := byTypes[key]
		if !ok {
			g = &group{opts: opts}
			byTypes[key] = g
			groups = append(groups, g)
		}
		g.formats = append(g.formats, f.Name)
	}
	var out []*Schema
	for _, g := range groups {
		props := map[string]*Schema{}
		for _, opts := range g.opts {
			for _, o := range recipe.OptionFields(opts) {
				if props[o.Key] != nil {
					continue // the text family's bounds win (opset 17 for an LLM's onnx-fp32)
				}
				s := scalar(o.Type)
				if o.Type.Kind() == reflect.Slice {
					s = &Schema{Type: "array", Items: scalar(o.Type.Elem())}
				}
				s.Description = o.Doc
				for _, e := range o.Enum {
					s.Enum = append(s.Enum, e)
				}
				s.Minimum = o.Min
				props[o.Key] = s
			}
		}
		out = append(out, &Schema{
			If:   &Schema{Required: []string{"format"}, Properties: map[string]*Schema{"format": {Enum: g.formats}}},
			Then: &Schema{Properties: map[string]*Schema{"with": nullable(&Schema{Type: "object", Properties: props, AdditionalProperties: false})}},
		})
	}
	if len(none) > 0 {
		out = append(out, &Schema{
			If:   &Schema{Required: []string{"format"}, Properties: map[string]*Schema{"format": {Enum: none}}},
			Then: &Schema{Properties: map[string]*Schema{"with": nullable(&Schema{Type: "object", MaxProperties: ptr(0)})}},
		})
	}
	return out
}
