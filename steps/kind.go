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
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// Kind is one kind of step. Its parameters are a struct of its own (a
// pointer to it is what Tools, Resources and Context.Params hold); the
// planner writes every value explicitly, so a kind has no defaults of its
// own, and the struct's JSON is what enters the step's cache key.
type Kind interface {
	Name() string
	// Version changes whenever the kind's output for the same inputs would
	// change, so old cache entries stop matching.
	Version() int
	// NewParams returns a pointer to a new, zero value of the kind's
	// parameters (for a plan read back from JSON, and recipe overrides).
	NewParams() any
	// Tools lists the tools Run will call; their identity (path digest and
	// version) is part of the cache key.
	Tools(params any) []string
	// Resources is the step's weight for the scheduler.
	Resources(params any) Resources
	Run(ctx context.Context, sc *Context) error
}

// HostRequirer is a kind that cannot run on some hosts (the NVIDIA kinds
// without a GPU). RequireHost is asked before anything else, tool lookup
// included, so the refusal names the real reason and its fix.
type HostRequirer interface {
	RequireHost(params any) error
}

// Resources is a step's weight for the scheduler.
type Resources struct {
	// Cores is the most threads the step's tool can use well. With
	// MinCores set (and under Cores) the step is elastic: it starts once
	// MinCores are free and is granted what is free then, up to Cores;
	// Context.Threads says how many, and the tool must be told.
	Cores    int
	MinCores int
	// MemoryMB is the step's memory weight: with ModelFactor set, the
	// fixed part (interpreter, libraries, buffers), to which ModelFactor
	// times the model's size (model.source's bytes) is added. The engine
	// replaces the sum with the peak RSS measured the last time the kind
	// ran on a model of about that size, when it has one.
	MemoryMB    int64
	ModelFactor float64
	// TensorFactor times the model's largest tensor (in an LLM, the
	// embedding) is added too: tools that convert or quantize a tensor at a
	// time peak with copies of it, so a large vocabulary weighs more than
	// the model's total size says.
	TensorFactor float64
	// OwnWaitPolicy leaves OpenMP's wait policy to the tool instead of
	// OMP_WAIT_POLICY=PASSIVE (see ThreadEnv): for steps that measure
	// speed as users would see it.
	OwnWaitPolicy bool
	// Network marks steps whose failures may be transient and are retried.
	Network bool
	// Host is what a machine needs to run the step, for the executors
	// that place steps on other machines (Ray, Argo Workflows).
	Host HostNeeds
}

// HostNeeds are a step's host requirements beyond cores and memory.
type HostNeeds struct {
	// NvidiaGPU: the step runs only where an NVIDIA GPU is.
	NvidiaGPU bool
	// Device: the step builds for this catalog device and must run on
	// it (TensorRT engines are built on the GPU they run on).
	Device string
	// PrefersMacOS: the step does more on macOS (Core ML prediction) and
	// runs elsewhere with less; placed on macOS when the cluster has it.
	PrefersMacOS bool
}

// ParamsOf returns a step's parameters as the kind's own type. Params of
// another type are a programming error (a plan built by hand wrongly).
func ParamsOf[P any](params any) *P {
	if p, ok := params.(*P); ok && p != nil {
		return p
	}
	var zero P
	panic(fmt.Sprintf("steps: parameters are %T, not *%T", params, zero))
}

// Eval is how a quality step scores a model on the evaluation text, with
// llama-perplexity's scheme: chunks of Chunk tokens, the second half of each
// scored, at most MaxChunks of them (0: every chunk of the text).
type Eval struct {
	Chunk     int `json:"eval_chunk"`
	MaxChunks int `json:"eval_max_chunks"`
}

// Data roles: what a data file is to the step that reads it.
const (
	DataEval        = "eval"
	DataCalibration = "calibration"
	// DataPrompts are the chat prompts a decode check generates from
	// (builtin:chat-prompts).
	DataPrompts = "prompts"
)

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
	// Params is a pointer to the kind's parameters struct.
	Params any
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
	// Data resolves a data role (DataEval, DataCalibration) to the file
	// the step reads; the file's digest is in the step's cache key.
	Data func(role string) (string, error)
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
	// Threads is the number of cores the scheduler granted this run of
	// the step (at least 1). Exec already tells every child through
	// OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS and
	// EDGEPIPE_THREADS; a tool with its own flag (llama.cpp's -t) must get
	// it there too. It is recorded in the result, never in the cache key:
	// the same step run with other threads makes the same output.
	Threads int
}

// NumThreads is Threads, at least 1 (a Context built by hand has none).
func (sc *Context) NumThreads() int { return max(sc.Threads, 1) }

// ThreadEnv is the environment that tells a child process and the
// libraries in it how many threads it may use. The Python helpers read
// EDGEPIPE_THREADS for torch.set_num_threads and ONNX Runtime's intra-op
// threads.
//
// It also sets OMP_WAIT_POLICY=PASSIVE unless inherited already sets a
// policy. torch's libgomp spins at every barrier by default; GPTQ and AWQ
// run thousands of tiny ops per layer, each ending at a barrier, and when
// the two threads do not each have a core (another step, another program)
// the spinning thread burns the time its peer needs, many times over
// (docs/results/memory-weights.md, "Threads and OpenMP's wait policy").
// Kinds whose tools lose by sleeping between parallel regions (llama.cpp:
// see the gguf package's llamaCppWaitPolicy) set Resources.OwnWaitPolicy.
func ThreadEnv(threads int, inherited []string, ownWaitPolicy bool) []string {
	n := strconv.Itoa(max(threads, 1))
	env := []string{"EDGEPIPE_THREADS=" + n, "OMP_NUM_THREADS=" + n, "MKL_NUM_THREADS=" + n, "OPENBLAS_NUM_THREADS=" + n}
	if ownWaitPolicy {
		return env
	}
	for _, kv := range inherited {
		if strings.HasPrefix(kv, "OMP_WAIT_POLICY=") {
			return env
		}
	}
	return append(env, "OMP_WAIT_POLICY=PASSIVE")
}

// HostBound is implemented by kinds whose output is a measurement of the
// machine they ran on: the executor adds HostIdentity to their cache key.
type HostBound interface{ HostIdentity() string }

// Uncached marks kinds that run every time and never enter the cache.
type Uncached interface{ Uncached() }

// External is implemented by kinds whose output may be a folder that
// already exists outside the cache (a local model folder): the executor
// digests it in place instead of copying it.
type External interface {
	// ExternalDir returns the folder when params name one.
	ExternalDir(params any, recipeDir string) (dir string, ok bool, err error)
	// CheckExternal refuses folders the recipe does not allow (pickle
	// weights, model code).
	CheckExternal(params any, dir string, files []digest.FileDigest) error
}

// Input returns the input produced by a step of the given kind, or an error
// naming what is missing: kinds find their inputs by kind, not by id, so a
// pipeline can be rearranged without renaming.
func (sc *Context) Input(kind Kind) (Input, error) {
	for _, in := range sc.Inputs {
		if in.Kind == kind.Name() {
			return in, nil
		}
	}
	var have []string
	for _, in := range sc.Inputs {
		have = append(have, in.StepID)
	}
	return Input{}, fmt.Errorf("step %s needs an input from a %q step, but its inputs are [%s]", sc.StepID, kind.Name(), strings.Join(have, ", "))
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
	// Perplexity is what a quality step measured; publishing gates on it.
	Perplexity *Perplexity `json:"perplexity,omitempty"`
	// Accuracy is what an image-classification quality step measured;
	// publishing gates on its drop against the reference.
	Accuracy *Accuracy `json:"accuracy,omitempty"`
	// Bench is what the bench step measured on this host.
	Bench *manifest.Bench `json:"bench,omitempty"`
	// VisionBench is what an image classifier's bench step measured.
	VisionBench *manifest.VisionBench `json:"vision_bench,omitempty"`
	// Generation is what a decode check measured; the step's Checks
	// hold its verdicts against the format's and the recipe's bounds.
	Generation *Generation `json:"generation,omitempty"`
	// Revision is the commit a source's branch or tag resolved to.
	Revision string `json:"revision,omitempty"`
	// Versions are the versions of the tools and libraries that ran, by
	// name; StandIns names the tools that were stand-ins for the real one.
	Versions map[string]string `json:"versions,omitempty"`
	StandIns []string          `json:"stand_ins,omitempty"`
	// Metrics are other measured numbers (calibration windows, the group
	// size chosen, ...); absent means not measured.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Facts are observations the manifest keeps in the step's note (the
	// tensor types llama-quantize really used, ...).
	Facts map[string]string `json:"facts,omitempty"`
	// Checks lists which validations ran and how they came out.
	Checks []Check `json:"checks,omitempty"`
	// Threads is the cores the step was granted when it ran (see
	// Context.Threads); a cache hit shows the run that made the output.
	Threads int `json:"threads,omitempty"`
	// PeakRSS is the largest resident set, in bytes, of a tool the step
	// ran (measured, like Threads, and in no key).
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
}

// Perplexity is a model's perplexity on the evaluation text, scored with
// llama-perplexity's scheme; a converted model's step also records the
// baseline's, on the same tokens, and the two models' agreement where its
// backend measures it.
type Perplexity struct {
	PPL    float64 `json:"ppl"`
	Stderr float64 `json:"ppl_stderr,omitempty"`
	// Baseline is the unconverted model's perplexity; 0 in the baseline's
	// own step.
	Baseline float64 `json:"baseline_ppl,omitempty"`
	// EvalTokens are the tokens scored, in Chunks chunks of Context.
	EvalTokens int `json:"eval_tokens"`
	Context    int `json:"context"`
	Chunks     int `json:"chunks"`
	// KLDivergence and Top1Agreement compare the two models' next-token
	// distributions (llama.cpp's --kl-divergence); nil when not measured.
	KLDivergence  *float64 `json:"kl_divergence,omitempty"`
	Top1Agreement *float64 `json:"top1_agreement,omitempty"`
	// DeltaLow and DeltaHigh bound the delta (PPL - Baseline) at 95%;
	// Interval says how (a paired bootstrap over the tokens, or
	// llama.cpp's own estimate). Absent when not measured.
	DeltaLow  *float64 `json:"delta_low,omitempty"`
	DeltaHigh *float64 `json:"delta_high,omitempty"`
	Interval  string   `json:"interval,omitempty"`
	// Backend is what computed it (llama.cpp, transformers, onnxruntime).
	Backend string `json:"backend"`
}

// Accuracy is a classifier's top-1 accuracy on a labelled image set; a
// converted model's step also records the reference model's (the fp32
// PyTorch model, on the same images) and how often the two agree.
type Accuracy struct {
	Top1    float64 `json:"top1"`
	Correct int     `json:"correct"`
	Images  int     `json:"images"`
	// Reference is the reference model's top-1; nil in the reference's
	// own step.
	Reference *float64 `json:"reference_top1,omitempty"`
	Agreement *float64 `json:"agreement,omitempty"`
	// Unlabelled: the set has no labels (every label -1), so Top1 and
	// Correct are 0 and mean nothing; only Agreement measures the model.
	Unlabelled       bool   `json:"unlabelled,omitempty"`
	Backend          string `json:"backend"`
	ReferenceBackend string `json:"reference_backend,omitempty"`
}

// Generation is a decode check's measurement (the manifest's record, kept
// there as metrics.generation).
type Generation = manifest.Generation

// SetVersion records the version of a tool or library that ran.
func (r *Result) SetVersion(name, v string) {
	if r.Versions == nil {
		r.Versions = map[string]string{}
	}
	r.Versions[name] = v
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

// ParseResult decodes a result record.
func ParseResult(b []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("result record: %w", err)
	}
	return &r, nil
}

// ReadResult reads dir/result.json; a missing file is an empty result.
func ReadResult(dir string) (*Result, error) {
	b, err := boundedfile.Read(filepath.Join(dir, ResultFile), boundedfile.ResultLimit)
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

// OutputPath resolves ${name.outputs.role}: name is a step id, or a target
// name (its published folder).
func (sc *Context) OutputPath(name, role string) (string, error) {
	for _, in := range sc.Inputs {
		if in.StepID != name && in.StepID != "publish:"+name {
			continue
		}
		if role == "dir" {
			return in.Dir, nil
		}
		if in.Result != nil {
			if rel, ok := in.Result.Files[role]; ok {
				return filepath.Join(in.Dir, rel), nil
			}
		}
		return "", fmt.Errorf("step %s: %s has no output %q", sc.StepID, name, role)
	}
	return "", fmt.Errorf("step %s refers to ${%s.outputs.%s} but does not need %s: add it to needs", sc.StepID, name, role, name)
}
