package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

const committed = "../../docs/recipe.schema.json"

func TestCommittedSchemaIsCurrent(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("read the committed schema: %v; create it with `%s`", err, RegenerateCommand)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/recipe.schema.json is out of date with the recipe types; regenerate it from the repository root with `%s` and commit it", RegenerateCommand)
	}
}

// compile loads the committed schema into a real 2020-12 validator, which
// also checks it against the draft's meta-schema.
func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("recipe.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("recipe.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// instance reads a recipe as editors do: YAML (merge keys expanded) to JSON.
func instance(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jsonKeys(v))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// jsonKeys turns YAML mappings with non-string keys into JSON objects.
func jsonKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonKeys(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonKeys(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonKeys(e)
		}
	}
	return v
}

func TestRecipesValidate(t *testing.T) {
	s := compile(t)
	shipped, _ := filepath.Glob("../../recipes/*.yaml")
	good, _ := filepath.Glob("../recipe/testdata/recipes/good/*.yaml")
	if len(shipped) == 0 || len(good) == 0 {
		t.Fatalf("found %d recipes and %d good test recipes; the test looks in the wrong place", len(shipped), len(good))
	}
	for _, path := range append(shipped, good...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(instance(t, data)); err != nil {
			t.Errorf("%s does not validate against the schema:\n%v", path, err)
		}
	}
	// The example recipes point editors at the schema.
	for _, path := range shipped {
		data, _ := os.ReadFile(path)
		first, _, _ := strings.Cut(string(data), "\n")
		ref, ok := strings.CutPrefix(first, "# yaml-language-server: $schema=")
		if !ok {
			t.Errorf("%s: the first line should be # yaml-language-server: $schema=../docs/recipe.schema.json, got %q", path, first)
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), ref)); err != nil {
			t.Errorf("%s: its schema comment points at %s, which does not exist", path, ref)
		}
	}
}

// parserAccepts parses and validates a recipe as `edgepipe validate` does
// (without the step-kind check, which the schema leaves open).
func parserAccepts(data string) (bool, string) {
	r, err := recipe.Parse("recipe.yaml", []byte(data))
	var diags recipe.Diagnostics
	if err != nil && !errors.As(err, &diags) {
		return false, err.Error()
	}
	if r != nil {
		diags = append(diags, recipe.Validate(r, plan.Catalog{}, nil)...)
	}
	return len(diags) == 0, diags.Error()
}

const base = `edgepipe: 1
name: tiny
model: {source: builtin:smollm2-135m}
targets:
  cpu: {device: x86-laptop, format: gguf-q8_0}
`

// TestSchemaAgreesWithParser: for each recipe, the schema and the parser
// give the same answer, so an editor's squiggle means what
// `edgepipe validate` will say.
func TestSchemaAgreesWithParser(t *testing.T) {
	s := compile(t)
	cases := []struct {
		name, recipe string
		ok           bool
	}{
		{"minimal", base, true},
		{"empty sections keep the defaults", base + "data:\nquality:\nresources:\nsteps:\ntoolchains:\ndescription:\n", true},
		{"x- keys hold anchors", `x-common: &c {device: x86-laptop}
` + strings.Replace(base, "cpu: {device: x86-laptop, format: gguf-q8_0}", "cpu: {<<: *c, format: gguf-q8_0}", 1), true},
		{"device alias", strings.Replace(base, "x86-laptop", "generic-x86-laptop", 1), true},
		{"every non-GGUF format by name", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0", "device: nvidia-h100, format: awq-w4a16", 1), true},
		{"override of a generated step needs no uses", base + "steps:\n  gguf-quantize:q8_0: {with: {threads: 2}}\n", true},
		{"target max_delta override", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, quality: {perplexity: {max_delta: 0.2}}}", 1), true},
		{"budgets and kv_dtype", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, kv_dtype: q8, min_tokens_per_s: 5, max_memory_gb: 2, max_first_token_ms: 100}", 1), true},
		{"publish destinations", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, publish: [oci://localhost:5000/edgepipe/tiny, {url: 's3::https://s3.eu-west-1.amazonaws.com/models/edge/', insecure: false}]}", 1), true},
		{"empty publish", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, publish: }", 1), true},
		{"GGUF options", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, with: {imatrix: true}}", 1), true},
		{"empty with", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, with: }", 1), true},
		{"ONNX INT4 options", strings.Replace(base, "format: gguf-q8_0}", "format: onnx-int4, with: {method: rtn, block_size: 16, symmetric: false, opset: 17}}", 1), true},
		{"QNN backend", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0}", "device: snapdragon-8-gen-3, format: qnn-w8a16, with: {backend: ai-hub, samples: 2}}", 1), true},
		{"AWQ grid", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0}", "device: nvidia-h100, format: awq-w4a16, with: {n_grid: 10, group_size: 64}}", 1), true},

		{"version 2", strings.Replace(base, "edgepipe: 1", "edgepipe: 2", 1), false},
		{"version as a string", strings.Replace(base, "edgepipe: 1", `edgepipe: "1"`, 1), false},
		{"no name", strings.Replace(base, "name: tiny\n", "", 1), false},
		{"uppercase name", strings.Replace(base, "name: tiny", "name: Tiny", 1), false},
		{"name too long", strings.Replace(base, "name: tiny", "name: "+strings.Repeat("a", 65), 1), false},
		{"unknown top-level key", base + "extra: 1\n", false},
		{"unknown model key", strings.Replace(base, "{source:", "{sauce: x, source:", 1), false},
		{"model without source", strings.Replace(base, "{source: builtin:smollm2-135m}", "{allow_pickle: true}", 1), false},
		{"no targets", strings.Replace(base, "targets:\n  cpu: {device: x86-laptop, format: gguf-q8_0}\n", "targets: {}\n", 1), false},
		{"target name with a slash", strings.Replace(base, "cpu:", "a/b:", 1), false},
		{"target without device", strings.Replace(base, "device: x86-laptop, ", "", 1), false},
		{"unknown device", strings.Replace(base, "x86-laptop", "x86-desktop", 1), false},
		{"unknown format", strings.Replace(base, "gguf-q8_0", "gguf-q9_0", 1), false},
		{"GGUF alias is not a format", strings.Replace(base, "gguf-q8_0", "gguf-q4_k", 1), false},
		{"uppercase GGUF type", strings.Replace(base, "gguf-q8_0", "gguf-Q8_0", 1), false},
		{"unknown kv_dtype", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, kv_dtype: int8}", 1), false},
		{"context 0", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, context: 0}", 1), false},
		{"negative budget", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, max_memory_gb: -1}", 1), false},
		{"target sets warn_delta", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, quality: {perplexity: {warn_delta: 0.1}}}", 1), false},
		{"negative max_delta", base + "quality: {perplexity: {max_delta: -1}}\n", false},
		{"chunks as a fraction", base + "quality: {perplexity: {max_chunks: 1.5}}\n", false},
		{"unknown resources key", base + "resources: {cpus: 2}\n", false},
		{"new step without uses", base + "steps:\n  smoke: {needs: [cpu]}\n", false},
		{"needs as a string", base + "steps:\n  smoke: {uses: run, needs: cpu}\n", false},
		{"unknown toolchain key", base + "toolchains:\n  llamacpp: {pyhton: /usr/bin/python3}\n", false},
		{"tool path as a list", base + "toolchains:\n  llamacpp: {tools: {llama-quantize: [a]}}\n", false},
		{"publish as a string", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, publish: oci://ghcr.io/a/b}", 1), false},
		{"publish to s3://", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, publish: ['s3://bucket/x']}", 1), false},
		{"publish entry without url", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, publish: [{insecure: true}]}", 1), false},
		{"GGUF option typo", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, with: {imatrx: true}}", 1), false},
		{"GGUF option of the wrong type", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, with: {imatrix: \"yes\"}}", 1), false},
		{"Core ML option typo", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0}", "device: apple-a18, format: coreml-int4, with: {kv_cach: none}}", 1), false},
		{"Core ML option value", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0}", "device: apple-a18, format: coreml-int4, with: {kv_cache: fixed}}", 1), false},
		{"an ONNX INT4 option on ONNX FP32", strings.Replace(base, "format: gguf-q8_0}", "format: onnx-fp32, with: {block_size: 16}}", 1), false},
		{"an AWQ option on GPTQ", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0}", "device: nvidia-h100, format: gptq-w4a16, with: {n_grid: 10}}", 1), false},
		{"an option below its minimum", strings.Replace(base, "format: gguf-q8_0}", "format: onnx-fp32, with: {opset: 13}}", 1), false},
		{"options on a format that takes none", strings.Replace(base, "device: x86-laptop, format: gguf-q8_0}", "device: jetson-thor, format: nvfp4, with: {x: 1}}", 1), false},
		{"allow_pickle as a string", strings.Replace(base, "{source: builtin:smollm2-135m}", `{source: builtin:smollm2-135m, allow_pickle: "yes"}`, 1), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parserOK, diags := parserAccepts(c.recipe)
			if parserOK != c.ok {
				t.Fatalf("the parser says ok=%v, the case expects %v (fix the case):\n%s", parserOK, c.ok, diags)
			}
			err := s.Validate(instance(t, []byte(c.recipe)))
			if schemaOK := err == nil; schemaOK != c.ok {
				t.Errorf("the schema says ok=%v but the parser says %v:\n%s\nschema: %v\nparser: %s", schemaOK, c.ok, c.recipe, err, diags)
			}
		})
	}
}

// TestKeysMatchParser: every mapping the parser reads strictly has exactly
// the keys the schema lists, so neither can gain a key the other lacks.
// The parser names its valid keys when it meets an unknown one.
func TestKeysMatchParser(t *testing.T) {
	root, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) *Schema { return root.Defs[name] }
	places := []struct {
		where  string
		recipe string
		schema *Schema
	}{
		{"top level", base + "zzzzzzzzzzzz: 1\n", root},
		{"model", strings.Replace(base, "{source:", "{zzzzzzzzzzzz: 1, source:", 1), def("model")},
		{"data", base + "data: {zzzzzzzzzzzz: 1}\n", def("data")},
		{"quality", base + "quality: {zzzzzzzzzzzz: 1}\n", def("quality")},
		{"quality.perplexity", base + "quality: {perplexity: {zzzzzzzzzzzz: 1}}\n", def("perplexity")},
		{"resources", base + "resources: {zzzzzzzzzzzz: 1}\n", def("resources")},
		{"a target", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, zzzzzzzzzzzz: 1}", 1), def("target")},
		{"a step", base + "steps:\n  smoke: {uses: run, zzzzzzzzzzzz: 1}\n", def("step")},
		{"a toolchain", base + "toolchains:\n  llamacpp: {zzzzzzzzzzzz: 1}\n", def("toolchain")},
		{"a publish entry", strings.Replace(base, "format: gguf-q8_0}", "format: gguf-q8_0, publish: [{url: oci://localhost:5000/a, zzzzzzzzzzzz: 1}]}", 1), def("target").Properties["publish"].Items.AnyOf[1]},
	}
	for _, p := range places {
		_, err := recipe.Parse("recipe.yaml", []byte(p.recipe))
		var diags recipe.Diagnostics
		if !errors.As(err, &diags) {
			t.Fatalf("%s: the parser accepted an unknown key: %v", p.where, err)
		}
		var parser []string
		for _, d := range diags {
			if list, ok := strings.CutPrefix(d.Hint, "valid keys here: "); ok && strings.Contains(d.Msg, "zzzzzzzzzzzz") {
				parser = strings.Split(list, ", ")
			}
		}
		if parser == nil {
			t.Fatalf("%s: the parser did not list its valid keys: %s", p.where, diags.Error())
		}
		var schema []string
		for k := range p.schema.Properties {
			schema = append(schema, k)
		}
		sort.Strings(parser)
		sort.Strings(schema)
		if strings.Join(parser, " ") != strings.Join(schema, " ") {
			t.Errorf("%s: the parser reads keys %v but the schema lists %v; update pipelines/recipe.go's json tags or internal/schema/docs.go, then run `%s`",
				p.where, parser, schema, RegenerateCommand)
		}
		if p.schema.AdditionalProperties != false {
			t.Errorf("%s: the parser rejects unknown keys, so the schema should set additionalProperties: false", p.where)
		}
	}
}

func TestUndocumentedFieldsFailGeneration(t *testing.T) {
	saved := fieldDocs["Target.Device"]
	delete(fieldDocs, "Target.Device")
	defer func() { fieldDocs["Target.Device"] = saved }()
	_, err := Generate()
	if err == nil || !strings.Contains(err.Error(), `fieldDocs["Target.Device"]`) {
		t.Fatalf("generating without a field's documentation: %v, want an error naming it", err)
	}
}

// docs/format-options.md is generated from the formats' typed options: an
// option added, removed or reworded without regenerating it fails here.
func TestFormatOptionsCurrent(t *testing.T) {
	want := FormatOptions()
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "format-options.md"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("docs/format-options.md is out of date (%v): run `%s` and commit it", err, RegenerateOptionsCommand)
	}
	// Every format the catalog knows has its section or is listed as
	// taking none.
	for _, f := range catalog.Formats() {
		if !bytes.Contains(want, []byte("`"+f.Name+"`")) {
			t.Errorf("format %s is not in the reference", f.Name)
		}
	}
}
