package plan

import (
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Family is one format family, everything edgepipe knows about it in one
// value: its catalog rows, its with: options, how a target of it becomes
// steps, the step kinds those steps run, and the toolchains their tools
// come from. A family registers once (package pipelines registers the
// built-in ones), so the catalog, the planner, the executor and the
// toolchain installer cannot disagree about it.
type Family struct {
	// Name is the family's package name (gguf, llmcompressor, ...).
	Name string
	// Task is the recipe task the family expands targets of; "" is the
	// default task (text generation).
	Task    string
	Formats catalog.FormatSet
	// TaskFormats are the formats a family of another task expands,
	// which may share names with the text-generation families' (a vision
	// onnx-fp32); its Formats rows are only those new to the catalog.
	TaskFormats []string
	// Options returns a new, empty value of a format's typed with:
	// options (a pointer to a struct), or nil when it takes none.
	Options func(format string) any
	Expand  Expander
	Kinds   []steps.Kind
	// Toolchains are the toolchains the family brings.
	Toolchains []toolchain.Spec
	// Helpers are the family's Python helper scripts (its python/ folder),
	// written beside every other helper when a toolchain runs them.
	Helpers fs.FS
	// ToolsFrom adds the family's tools to toolchains another family or
	// the core brings (toolchain name -> tool names).
	ToolsFrom map[string][]string
	// Bench is the runtime that times the family's formats on this host,
	// when it has one.
	Bench shared.BenchBackend
	// TaskBench names the runtime that times a format of the family's
	// task on this host, or false when none here can. A family of a task
	// other than text generation adds its bench steps in Expand.
	TaskBench func(format string) (runtime string, ok bool)
	// Notes are what a run should say before it starts about targets of
	// this family (a host that cannot build them, a flow known to fail).
	Notes func(*Plan) recipe.Diagnostics
	// NoContract leaves a text-generation family's targets without the
	// behavioural contract step: only for a family whose artifacts are no
	// model at all (the engine's tests' family, whose model is a string).
	// Every built-in family's targets get it.
	NoContract bool
	// NamedArtifact says a format's artifact is one file or package
	// (model-q8_0.gguf, model.mlpackage) whose name no runtime reads, so it
	// is published under the model's name (the recipe's model.name, or its
	// source's). Formats whose runtimes find files by fixed names in a
	// folder (ONNX external data, MLC, a Hugging Face checkpoint) leave it
	// false.
	NamedArtifact func(format string) bool
	// Refuses says why a format of the family cannot take a model
	// architecture (its config.json model_type: llama, qwen2, gemma3_text,
	// ...), in a sentence a user reads; "" when it takes it. Plan refuses
	// such a target at its format: key before anything runs. Nil takes
	// every architecture.
	Refuses func(format, architecture string) string
}

var families = struct {
	sync.RWMutex
	list     []*Family
	byFormat map[string]*Family
	// byTask maps a task other than text generation to its formats'
	// families.
	byTask map[string]map[string]*Family
}{byFormat: map[string]*Family{}, byTask: map[string]map[string]*Family{}}

// Register adds format families; a format, step kind or toolchain
// registered twice is a programming error.
func Register(fams ...Family) {
	families.Lock()
	defer families.Unlock()
	for i := range fams {
		f := &fams[i]
		catalog.RegisterFormats(f.Formats)
		for _, k := range f.Kinds {
			steps.Register(k)
		}
		for _, s := range f.Toolchains {
			toolchain.Register(s)
		}
		if f.Helpers != nil {
			toolchain.RegisterHelpers("pipelines/"+f.Name, f.Helpers)
		}
		for tc, tools := range f.ToolsFrom {
			toolchain.AddTools(tc, tools...)
		}
		if f.Bench != nil {
			shared.RegisterBenchBackend(f.Bench)
		}
		if f.Task != "" {
			if families.byTask[f.Task] == nil {
				families.byTask[f.Task] = map[string]*Family{}
			}
			for _, name := range f.TaskFormats {
				families.byTask[f.Task][name] = f
			}
			families.list = append(families.list, f)
			continue
		}
		for _, fm := range f.Formats.Formats {
			families.byFormat[fm.Name] = f
		}
		families.list = append(families.list, f)
	}
}

// FamilyOf returns the family a format belongs to.
func FamilyOf(format string) (*Family, bool) {
	families.RLock()
	defer families.RUnlock()
	f, ok := families.byFormat[format]
	return f, ok
}

// FamilyFor returns the family that expands a format for a recipe task
// ("" or text-generation: FamilyOf).
func FamilyFor(task, format string) (*Family, bool) {
	if task == "" || task == recipe.TaskTextGeneration {
		return FamilyOf(format)
	}
	families.RLock()
	defer families.RUnlock()
	f, ok := families.byTask[task][format]
	return f, ok
}

// TaskFormats lists the formats of a task other than text generation.
func TaskFormats(task string) []string {
	var out []string
	for _, f := range Families() {
		if f.Task == task {
			out = append(out, f.TaskFormats...)
		}
	}
	return out
}

// Families lists the registered families in registration order.
func Families() []*Family {
	families.RLock()
	defer families.RUnlock()
	return append([]*Family(nil), families.list...)
}

// BuiltinFamilies lists the format prefixes that have a pipeline.
func BuiltinFamilies() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range Families() {
		for _, fm := range f.Formats.Formats {
			if !seen[fm.Family] {
				seen[fm.Family] = true
				out = append(out, fm.Family+"-*")
			}
		}
	}
	sort.Strings(out)
	return out
}

// Catalog is what recipe validation checks targets against: the device
// catalog and the registered families' formats, options and bench runtimes.
type Catalog struct{ catalog.Catalog }

// Options returns a new options value for the format's with:, or nil.
func (Catalog) Options(format string) any {
	f, ok := FamilyOf(format)
	if !ok || f.Options == nil {
		return nil
	}
	return f.Options(format)
}

// TaskFormats lists the formats of a task other than text generation.
func (Catalog) TaskFormats(task string) []string { return TaskFormats(task) }

// TaskOptions returns a new options value for a format of a task.
func (Catalog) TaskOptions(task, format string) any {
	f, ok := FamilyFor(task, format)
	if !ok || f.Options == nil {
		return nil
	}
	return f.Options(format)
}

// TaskBench names the runtime that times a format of a task other than
// text generation on this host.
func (Catalog) TaskBench(task, format string) (string, bool) {
	f, ok := FamilyFor(task, format)
	if !ok || f.TaskBench == nil {
		return "", false
	}
	return f.TaskBench(format)
}

// CheckSource refuses a model.source no run could fetch.
func (Catalog) CheckSource(src string) error { return shared.CheckSource(src) }

// Notes collects what every family says about a plan before it runs.
func Notes(p *Plan) recipe.Diagnostics {
	var diags recipe.Diagnostics
	for _, f := range Families() {
		if f.Notes != nil {
			diags = append(diags, f.Notes(p)...)
		}
	}
	return diags
}

func noPipeline(r *recipe.Recipe, t *recipe.Target) recipe.Diagnostic {
	if !r.Traits().Generates {
		return recipe.Diagnostic{Pos: t.FormatPos,
			Msg:  fmt.Sprintf("format %s has no image-classification pipeline", t.Format),
			Hint: "image-classification targets take " + strings.Join(TaskFormats(r.Task), ", ")}
	}
	if _, ok := FamilyFor(recipe.TaskImageClassification, t.Format); ok {
		return recipe.Diagnostic{Pos: t.FormatPos,
			Msg:  fmt.Sprintf("format %s is an image-classification format, and this recipe is for text generation", t.Format),
			Hint: "add task: image-classification to the recipe for an image classifier, or use onnx-int4 or another text-generation format"}
	}
	return recipe.Diagnostic{Pos: t.FormatPos,
		Msg:  fmt.Sprintf("format %s has no built-in pipeline yet", t.Format),
		Hint: "formats with a pipeline in this build: " + strings.Join(BuiltinFamilies(), ", ")}
}
