// Package steps holds one file per step kind. A kind turns a step's params
// and its inputs (the output folders of the steps it needs) into an output
// folder, by running the real tool's documented command line.
//
// Kinds never touch the cache or the published artifacts: the executor hands
// them an empty folder to fill, and commits it only when Run returns nil.
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/digest"
)

// Kind is one kind of step.
type Kind interface {
	Name() string
	// Version changes whenever the kind's output for the same inputs would
	// change, so old cache entries stop matching.
	Version() int
	// Tools lists the tools Run will call; their identity (path digest and
	// version) is part of the cache key.
	Tools(params Params) []string
	// Resources is the step's weight for the scheduler.
	Resources(params Params) Resources
	Run(ctx context.Context, sc *Context) error
}

// HostRequirer is a kind that cannot run on some hosts (the NVIDIA kinds
// without a GPU). RequireHost is asked before anything else, tool lookup
// included, so the refusal names the real reason and its fix.
type HostRequirer interface {
	RequireHost(params Params) error
}

// Resources is a step's weight for the scheduler.
type Resources struct {
	Cores    int
	MemoryMB int64
	// Network marks steps whose failures may be transient and are retried.
	Network bool
}

// Params are a step's canonical parameters (JSON types only).
type Params map[string]any

// String returns params[key] as a string, or def.
func (p Params) String(key, def string) string {
	if v, ok := p[key].(string); ok {
		return v
	}
	return def
}

// Int returns params[key] as an int, or def.
func (p Params) Int(key string, def int) int {
	switch v := p[key].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case json.Number:
		n, err := v.Int64()
		if err == nil {
			return int(n)
		}
	}
	return def
}

// Float returns params[key] as a float64, or def.
func (p Params) Float(key string, def float64) float64 {
	switch v := p[key].(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float64:
		return v
	case json.Number:
		f, err := v.Float64()
		if err == nil {
			return f
		}
	}
	return def
}

// Bool returns params[key] as a bool, or def.
func (p Params) Bool(key string, def bool) bool {
	if v, ok := p[key].(bool); ok {
		return v
	}
	return def
}

// Strings returns params[key] as a []string.
func (p Params) Strings(key string) []string {
	switch v := p[key].(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// Input is the output folder of a step this step needs.
type Input struct {
	StepID string
	Kind   string
	Dir    string
	// Result is the upstream step's result.json, if it wrote one.
	Result *Result
}

// Runner runs one child process by argv, logging to the step's log file.
type Runner func(ctx context.Context, argv []string, env []string) error

// Context is what a kind gets to do its work.
type Context struct {
	StepID string
	Params Params
	// Inputs by the id of the step that produced them, in needs order.
	Inputs []Input
	// Out is an empty folder on the cache's filesystem; whatever Run leaves
	// there becomes the step's output once Run returns nil.
	Out string
	// Scratch is a folder for temporary files that must not be cached.
	Scratch string
	// Tool resolves a tool name to the argv prefix that runs it.
	Tool func(name string) ([]string, error)
	// Exec runs a child process; output goes to Log.
	Exec Runner
	// Log receives the step's own messages (the child output goes there too).
	Log io.Writer
	// Data resolves a data reference (builtin:NAME or a path) to a file.
	Data func(ref string) (string, error)
	// Result collects what the step records for the manifest; Run fills it
	// and the executor writes it to Out/result.json.
	Result *Result
	// LogPath is the step's log file (child output is appended there).
	LogPath string
	// Progress reports bytes moved by long transfers (downloads), for
	// progress bars; never nil.
	Progress func(label string, done, total int64)
	// CacheDir is edgepipe's cache folder (toolchains, built-in models).
	CacheDir string
	// ExecDir, when set, is the working folder of the children Exec starts
	// (default: Scratch).
	ExecDir string
	// RecipeDir is the folder of the recipe, for paths written relative to it.
	RecipeDir string
}

// External is implemented by kinds whose output may be a folder that
// already exists outside the cache (a local model folder): the executor
// digests it in place instead of copying it.
type External interface {
	// ExternalDir returns the folder when params name one.
	ExternalDir(params Params, recipeDir string) (dir string, ok bool, err error)
	// CheckExternal refuses folders the recipe does not allow (pickle
	// weights, model code).
	CheckExternal(params Params, dir string, files []digest.FileDigest) error
}

// Input returns the input produced by a step of the given kind, or an error
// naming what is missing: kinds find their inputs by kind, not by id, so a
// pipeline can be rearranged without renaming.
func (sc *Context) Input(kind string) (Input, error) {
	for _, in := range sc.Inputs {
		if in.Kind == kind {
			return in, nil
		}
	}
	var have []string
	for _, in := range sc.Inputs {
		have = append(have, in.StepID)
	}
	return Input{}, fmt.Errorf("step %s needs an input from a %q step, but its inputs are [%s]", sc.StepID, kind, strings.Join(have, ", "))
}

// Run runs a tool by name with arguments, recording the full argv.
func (sc *Context) RunTool(ctx context.Context, tool string, args ...string) error {
	prefix, err := sc.Tool(tool)
	if err != nil {
		return err
	}
	argv := append(append([]string{}, prefix...), args...)
	sc.Result.Argv = append(sc.Result.Argv, argv)
	return sc.Exec(ctx, argv, nil)
}

// Result is what a step records about its run; it is stored beside the
// outputs as result.json so a cache hit carries it too.
type Result struct {
	// Files names the step's main outputs by role, relative to Out
	// (e.g. "model": "model-q4_k_m.gguf").
	Files map[string]string `json:"files,omitempty"`
	Argv  [][]string        `json:"argv,omitempty"`
	// Metrics are measured numbers; absent means not measured.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Facts are measured or derived non-numeric observations (verdicts,
	// the tensor types llama-quantize really used, ...).
	Facts map[string]string `json:"facts,omitempty"`
	// Checks lists which validations ran and how they came out.
	Checks []Check `json:"checks,omitempty"`
}

// Check is one validation that ran.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// ResultFile is the name of the result record inside a step's output.
const ResultFile = "result.json"

// SetMetric records a measured number.
func (r *Result) SetMetric(name string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[name] = v
}

// SetFact records a non-numeric observation.
func (r *Result) SetFact(name, v string) {
	if r.Facts == nil {
		r.Facts = map[string]string{}
	}
	r.Facts[name] = v
}

// SetFile records a main output by role.
func (r *Result) SetFile(role, rel string) {
	if r.Files == nil {
		r.Files = map[string]string{}
	}
	r.Files[role] = rel
}

// WriteResult writes r to dir/result.json.
func WriteResult(dir string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ResultFile), append(b, '\n'), 0o644)
}

// ReadResult reads dir/result.json; a missing file is an empty result.
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if os.IsNotExist(err) {
		return &Result{}, nil
	}
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, ResultFile), err)
	}
	return &r, nil
}

var registry = map[string]Kind{}

// Register adds a kind; called from each kind's init.
func Register(k Kind) {
	if _, dup := registry[k.Name()]; dup {
		panic("steps: duplicate kind " + k.Name())
	}
	registry[k.Name()] = k
}

// Lookup returns the kind with the given name.
func Lookup(name string) (Kind, bool) {
	k, ok := registry[name]
	return k, ok
}

// Names lists every registered kind, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
