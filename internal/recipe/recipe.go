// Package recipe is the user contract: the recipe model (format version 1),
// its strict parser, the defaults every recipe starts from, and validation
// against the device catalog and the format families. Every problem it finds
// is a Diagnostic with the recipe's FILE:LINE:COL and a fix.
package recipe

import "path/filepath"

// SourceStep is the id of the step that fetches model.source; a user step
// may name it in needs.
const SourceStep = "source"

// Pos is a place in a recipe file, 1-based, as YAML reports it.
type Pos struct {
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Col  int    `json:"col,omitempty"`
}

// Recipe is recipe format version 1. Field order follows the documented
// format; Pos fields point at the key that set the value so errors found
// after parsing (unknown device, bad needs) still say file:line:col.
type Recipe struct {
	Path        string `json:"-"`
	Edgepipe    int    `json:"edgepipe"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Task is what the model does: TaskTextGeneration (written as "" in
	// the recipe's JSON, the default) or TaskImageClassification. It
	// picks the formats' pipelines, the data sets' kind and the gate.
	Task  string `json:"task,omitempty"`
	Model Model  `json:"model"`
	Data  Data   `json:"data"`
	// Quality holds the defaults every target starts from.
	Quality Quality `json:"quality"`
	// Resources caps what the executor may use at once.
	Resources Resources `json:"resources"`
	// Targets in file order.
	Targets []Target `json:"targets"`
	// Bench is the on-host measurement every target of an
	// image-classification recipe takes unless it writes its own (each
	// target carries its copy); text-generation recipes bench per target.
	Bench *BenchSpec `json:"bench,omitempty"`
	// Steps are extra steps, or overrides of generated steps by id, in file order.
	Steps []StepSpec `json:"steps,omitempty"`
	// Toolchains override where a toolchain's tools come from (the user's own
	// Python or llama.cpp build), by toolchain name.
	Toolchains map[string]ToolchainOverride `json:"toolchains,omitempty"`

	NamePos  Pos `json:"-"`
	TaskPos  Pos `json:"-"`
	BenchPos Pos `json:"-"`
}

// Recipe tasks.
const (
	TaskTextGeneration      = "text-generation"
	TaskImageClassification = "image-classification"
)

// Tasks lists the tasks a recipe may name.
var Tasks = []string{TaskTextGeneration, TaskImageClassification}

// Traits are what a recipe's task means to the rest of edgepipe, said in
// one place: code asks for the trait it depends on, not for a task.
type Traits struct {
	// Generates: the model decodes text token by token: its gate is
	// perplexity drift, it has a KV cache and a decode ceiling.
	Generates bool
	// Images: its data sets are image sets (.npz), its gate top-1
	// accuracy or agreement with the reference.
	Images bool
}

// Traits of the recipe's task.
func (r *Recipe) Traits() Traits {
	if r.Task == TaskImageClassification {
		return Traits{Images: true}
	}
	return Traits{Generates: true}
}

// Model names the source weights and what the recipe allows them to contain.
type Model struct {
	Source string `json:"source"`
	// Name is what the published files are called after (a target's
	// GGUF is NAME-q8_0.gguf); "" takes it from the source (FileStem).
	Name            string `json:"name,omitempty"`
	AllowPickle     bool   `json:"allow_pickle"`
	TrustRemoteCode bool   `json:"trust_remote_code"`
	SourcePos       Pos    `json:"-"`
}

// Data names the calibration and evaluation texts ("builtin:NAME" or a path
// relative to the recipe file).
type Data struct {
	Calibration string `json:"calibration"`
	Eval        string `json:"eval"`
	// AllowOverlap accepts calibration data that overlaps the evaluation
	// data, which plan refuses by default: a gate scored on the data the
	// model was calibrated on flatters it.
	AllowOverlap bool `json:"allow_overlap,omitempty"`
	Pos          Pos  `json:"-"`
}

// Quality is the quality gate configuration: perplexity drift and
// generation agreement for text generation; for image classification a
// top-1 accuracy drop on labelled images, and/or top-1 agreement with the
// fp32 model, which needs no labels (both nil in a text-generation
// recipe, and Generation nil in an image-classification one).
type Quality struct {
	Perplexity PerplexityGate  `json:"perplexity"`
	Accuracy   *AccuracyGate   `json:"accuracy,omitempty"`
	Agreement  *AgreementGate  `json:"agreement,omitempty"`
	Generation *GenerationGate `json:"generation,omitempty"`
}

// GenerationGate bounds a text model's decode check: the artifact decodes
// the unconverted model's greedy generations from the built-in chat
// prompts (MaxNewTokens tokens at most each) token by token through its KV
// cache. Token agreement (the share of steps at which its most likely
// token is the original's) under MinTokenAgreement, or a mean KL divergence
// from the original's distribution over MaxMeanKL, is "fail" (no publish).
type GenerationGate struct {
	MinTokenAgreement float64 `json:"min_token_agreement"`
	MaxMeanKL         float64 `json:"max_mean_kl"`
	MaxNewTokens      int     `json:"max_new_tokens"`
}

// AccuracyGate: drop = reference top-1 accuracy - converted top-1
// accuracy on the same labelled images, as a fraction (0.01 is one
// percentage point). Above MaxDrop is "fail" (no publish).
type AccuracyGate struct {
	MaxDrop float64 `json:"max_drop"`
	// defaulted: set by the task, not written; a target's own agreement
	// gate replaces it (an agreement-gated target needs no labels).
	defaulted bool
}

// AgreementGate: agreement = the share of data.eval's images on which the
// converted model's top-1 class is the fp32 PyTorch model's. Under Min is
// "fail" (no publish). It measures faithfulness to the reference, not
// accuracy: it needs no labels, and a model wrong the same way scores 1.
type AgreementGate struct {
	Min float64 `json:"min"`
}

// PerplexityGate: delta = converted - baseline perplexity on the same tokens.
// Below WarnDelta is "excellent", above MaxDelta is "fail" (no publish).
type PerplexityGate struct {
	Context   int     `json:"context"`
	WarnDelta float64 `json:"warn_delta"`
	MaxDelta  float64 `json:"max_delta"`
	// MaxChunks bounds the evaluation cost; 0 means every chunk of the text.
	MaxChunks int `json:"max_chunks,omitempty"`
}

// Resources caps the executor. Zero means "the machine's".
type Resources struct {
	MaxMemoryGB float64 `json:"max_memory_gb,omitempty"`
	Jobs        int     `json:"jobs,omitempty"`
}

// Target is one published artifact: a model in one format for one device.
type Target struct {
	Name    string `json:"name"`
	Device  string `json:"device"`
	Format  string `json:"format"`
	Context int    `json:"context,omitempty"`
	// KVDtype is the KV-cache element type the runtime will use:
	// f16 (default), q8, q4 or fp8.
	KVDtype string `json:"kv_dtype,omitempty"`
	// Quality is the recipe default with this target's overrides applied.
	Quality Quality `json:"quality"`
	// With holds format-specific options (group_size, imatrix, backend,
	// ...) as written; Options is the same decoded into the format family's
	// typed options struct (a pointer), once the recipe is validated.
	With    map[string]any `json:"with,omitempty"`
	Options any            `json:"-"`
	// Budgets (issue 6); zero means unset.
	MinTokensPerS   float64 `json:"min_tokens_per_s,omitempty"`
	MaxMemoryGB     float64 `json:"max_memory_gb,omitempty"`
	MaxFirstTokenMS float64 `json:"max_first_token_ms,omitempty"`
	// Bench, when set, measures the artifact on this host (see BenchSpec).
	Bench *BenchSpec `json:"bench,omitempty"`
	// Publish lists the remotes the target is pushed to once its local
	// folder is published (OCI registries, S3-compatible storage).
	Publish []PublishTo `json:"publish,omitempty"`

	Pos       Pos `json:"-"` // the target's key
	DevicePos Pos `json:"-"`
	// WithPos is where each with: key is written ("": the with: key).
	WithPos    map[string]Pos `json:"-"`
	FormatPos  Pos            `json:"-"`
	KVDtypePos Pos            `json:"-"`
	ContextPos Pos            `json:"-"` // the context: key, when written
	BenchPos   Pos            `json:"-"`
}

// BenchSpec is a target's on-host measurement at a fixed input shape,
// with the artifact's runtime. Text generation: per-token decode latency
// at a KV-cache depth of PromptTokens, time to first token for a prompt
// of PromptTokens, and the host's memory bandwidth (llama.cpp for GGUF,
// ONNX Runtime for ONNX). Image classification: single inferences of
// Batch images at the model's input size (config.json), with the peak
// memory of the process that ran them.
type BenchSpec struct {
	// Warmup runs are timed but discarded: caches, page faults, thread
	// pools.
	Warmup int `json:"warmup"`
	// Runs are the timed runs: each decodes one token (and, separately,
	// processes one prompt), or classifies one batch.
	Runs int `json:"runs"`
	// PromptTokens is a text model's fixed input shape: the prompt's
	// length, and the KV-cache depth every decoded token is measured at.
	PromptTokens int `json:"prompt_tokens,omitempty"`
	// Batch is an image classifier's images per inference (0 for text).
	Batch int `json:"batch,omitempty"`
	// Threads is the runtime's thread count; 0 means every core.
	Threads int `json:"threads,omitempty"`
	// ProbeMiB is the memory-bandwidth test's buffer, which must be well
	// above the CPU's last-level cache (text generation only).
	ProbeMiB int `json:"probe_mib,omitempty"`
}

// PublishTo is one remote a target is pushed to: oci://HOST[:PORT]/REPO[:TAG]
// (the tag defaults to the target's name) or s3::https://HOST/BUCKET/PREFIX
// (a prefix ending in '/' gets the target's name appended). Written as a
// plain string, or as {url: ..., insecure: true} to allow plain HTTP to a
// registry that is not on loopback.
type PublishTo struct {
	URL      string `json:"url"`
	Insecure bool   `json:"insecure,omitempty"`
	Pos      Pos    `json:"-"`
}

// StepSpec is a user-written step ("steps:" section): either a new step
// (uses + needs + with) or, when its id matches a generated step, an override
// of that step's params.
type StepSpec struct {
	ID    string         `json:"id"`
	Uses  string         `json:"uses"`
	Needs []string       `json:"needs,omitempty"`
	With  map[string]any `json:"with,omitempty"`
	// Timeout in seconds; 0 means the kind's default.
	TimeoutS float64 `json:"timeout_s,omitempty"`

	Pos      Pos            `json:"-"`
	UsesPos  Pos            `json:"-"`
	NeedsPos []Pos          `json:"-"`
	WithPos  map[string]Pos `json:"-"`
}

// ToolchainOverride points a toolchain at tools the user already has.
type ToolchainOverride struct {
	Python string            `json:"python,omitempty"` // interpreter with the needed packages
	Tools  map[string]string `json:"tools,omitempty"`  // tool name -> executable path
	Pos    Pos               `json:"-"`
}

// Recipe defaults, from the domain brief (perplexity drift under 0.5 is
// excellent, over 2.0 means the conversion is broken).
const (
	DefaultPPLContext = 512
	DefaultWarnDelta  = 0.5
	DefaultMaxDelta   = 2.0
	DefaultKVDtype    = "f16"
)

// Generation agreement defaults. They start permissive, below what the
// built-in models' 4-bit artifacts measure (docs/results/decode.md), so a
// conversion that works is never failed by them, while one that decodes
// garbage is; MaxNewTokens is the N.
const (
	DefaultMinTokenAgreement = 0.5
	DefaultMaxMeanKL         = 1.0
	DefaultMaxNewTokens      = 64
	// MaxMaxNewTokens bounds the reference's cost: each token is decoded
	// once by the original and once per target.
	MaxMaxNewTokens = 1024
)

// DefaultGeneration is a new copy of the default generation gate.
func DefaultGeneration() *GenerationGate {
	return &GenerationGate{MinTokenAgreement: DefaultMinTokenAgreement, MaxMeanKL: DefaultMaxMeanKL, MaxNewTokens: DefaultMaxNewTokens}
}

// DefaultMaxAccuracyDrop is the domain brief's rule for static INT8 PTQ
// of vision models: accuracy must drop by under 1%.
const DefaultMaxAccuracyDrop = 0.01

// DefaultMinAgreement: the converted model must pick the fp32 model's
// class on at least 99% of the images, the brief's 1% read as a share of
// images whose answer changed.
const DefaultMinAgreement = 0.99

// The built-in labelled image sets of image-classification recipes: the
// calibration and test splits of scikit-learn's digits (data/README.md).
const (
	DefaultVisionCalibration = "builtin:digits-calibration"
	DefaultVisionEval        = "builtin:digits-test"
)

// UnlabelledVisionSets are the built-in image sets without labels (every
// label -1): photos from scikit-image's wheel (data/README.md). A recipe
// evaluating on one gates on agreement.
var UnlabelledVisionSets = []string{"builtin:skimage-photos", "builtin:skimage-photos-calibration"}

// Bench defaults: 10 warm-up and 50 timed runs (the domain brief's
// protocol) at a 128-token prompt with a 1 GiB bandwidth probe, or one
// image per inference.
const (
	DefaultBenchWarmup       = 10
	DefaultBenchRuns         = 50
	DefaultBenchPromptTokens = 128
	DefaultBenchProbeMiB     = 1024
	DefaultBenchBatch        = 1
)

// TargetNamed returns the recipe's target by name.
func (r *Recipe) TargetNamed(name string) *Target {
	for i := range r.Targets {
		if r.Targets[i].Name == name {
			return &r.Targets[i]
		}
	}
	return nil
}

// Dir is the folder relative paths in the recipe are resolved against.
func (r *Recipe) Dir() string {
	dir := "."
	if r.Path != "" {
		dir = filepath.Dir(r.Path)
	}
	// Tools run in scratch folders, so every path handed to them is absolute.
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
