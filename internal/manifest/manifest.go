// Package manifest describes a published artifact folder
// (artifacts/<recipe>/<target>/): the manifest.json that records what was
// built, from what, with which tools and how well it scored; writing and
// verifying it; and publishing a staged folder so that readers only ever see
// a complete one.
//
// The JSON shape is a contract with `edgepipe verify`, `edgepipe reproduce`
// and provenance: fields are only ever added. A metric that was not measured
// is absent from the JSON, never written as zero.
package manifest

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// Version is the manifest_version this package writes and reads.
const Version = 1

// FileName is the manifest's name inside an artifact folder.
const FileName = "manifest.json"

// Sidecars sit beside manifest.json and describe the folder, so the
// manifest cannot list them: the provenance statement records
// manifest.json's own digest, and the signature bundle signs that
// statement. Write, Verify and Publish leave them out of Files; package
// provenance writes and checks them.
const (
	ProvenanceFile = "provenance.intoto.json"
	SignatureFile  = "provenance.sigstore.json"
)

// IsSidecar reports whether rel (slash-separated, relative to the folder)
// is one of the sidecar files.
func IsSidecar(rel string) bool {
	return rel == ProvenanceFile || rel == SignatureFile
}

// Manifest is the content of manifest.json.
type Manifest struct {
	ManifestVersion int    `json:"manifest_version"`
	EdgepipeVersion string `json:"edgepipe_version"`
	// Created is when the manifest was written; Write fills it when zero.
	Created time.Time `json:"created"`
	Recipe  Recipe    `json:"recipe"`
	Target  Target    `json:"target"`
	Source  Source    `json:"source"`
	// Files lists every file in the folder except manifest.json itself,
	// logs included, sorted by path. Write computes it.
	Files []File `json:"files"`
	// Steps are every step the target needed, in execution order, cache hits
	// included (they say how the cached output was made).
	Steps   []Step   `json:"steps"`
	Metrics Metrics  `json:"metrics"`
	Budgets *Budgets `json:"budgets,omitempty"`
	// Toolchains are keyed by toolchain name, as Step.Toolchain names them.
	Toolchains map[string]Toolchain `json:"toolchains,omitempty"`
	// Sidecars are the files written beside the manifest after it (it
	// cannot list their digests): the provenance statement, and its
	// signature bundle when signed. Verify fails when one is missing.
	Sidecars []string `json:"sidecars,omitempty"`
}

// Recipe identifies the recipe file the artifact was built from.
type Recipe struct {
	Name string `json:"name"`
	// Path is the recipe file as given on the command line.
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// Target is the recipe target this folder is the artifact of.
type Target struct {
	Name    string `json:"name"`
	Device  string `json:"device"`
	Format  string `json:"format"`
	Context int    `json:"context,omitempty"`
	KVDtype string `json:"kv_dtype,omitempty"`
	// Artifact is the file or package a runtime loads, relative to the
	// folder (NAME-q8_0.gguf, NAME.mlpackage, mlc-chat-config.json);
	// scripts read it rather than guess names.
	Artifact string `json:"artifact,omitempty"`
}

// Source is where the weights came from.
type Source struct {
	URI string `json:"uri"`
	// ResolvedRevision is the commit a branch or tag resolved to; empty for
	// sources without revisions (builtin:, plain URLs, local folders).
	ResolvedRevision string `json:"resolved_revision,omitempty"`
	Files            []File `json:"files,omitempty"`
	// Quantized is set when the source was already quantized (a GGUF,
	// dequantized into the checkpoint every family converts): the
	// artifact inherits that rounding on top of its own.
	Quantized *SourceQuantization `json:"quantized,omitempty"`
}

// SourceQuantization is how a quantized source was stored.
type SourceQuantization struct {
	Format string `json:"format"`         // "gguf"
	Type   string `json:"type,omitempty"` // the GGUF's file type, e.g. Q4_K_M
	// TensorTypes counts the tensors of each storage type ("Q4_K:27 Q6_K:9 ...").
	TensorTypes string `json:"tensor_types,omitempty"`
}

// File is one file with its content digest. Path is relative, slash-separated.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Step records one executed (or cache-hit) step.
type Step struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	KindVersion int    `json:"kind_version"`
	// Argv holds every command line the step ran, one argv each.
	Argv         [][]string        `json:"argv"`
	ToolVersions map[string]string `json:"tool_versions,omitempty"`
	// Toolchain names the entry of Manifest.Toolchains the tools came from.
	Toolchain string `json:"toolchain,omitempty"`
	CacheKey  string `json:"cache_key"`
	CacheHit  bool   `json:"cache_hit"`
	// Started, Finished and DurationS are absent when the step did not run
	// in this build (a cache hit that recorded no times).
	Started   time.Time `json:"started,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`
	DurationS float64   `json:"duration_s,omitempty"`
	// StandIn is true when the tool was a stand-in (tests, demos), not the
	// real tool: such an artifact must never be mistaken for a real one.
	StandIn bool   `json:"stand_in"`
	Note    string `json:"note,omitempty"`
}

// Metrics are the measured results. Every field is optional: absent means
// not measured.
type Metrics struct {
	Perplexity *Perplexity `json:"perplexity,omitempty"`
	// Accuracy is an image classifier's gate, in place of Perplexity.
	Accuracy *Accuracy `json:"accuracy,omitempty"`
	// Agreement is an image classifier's agreement gate (with or in place
	// of Accuracy): not accuracy, faithfulness to the fp32 model.
	Agreement         *Agreement `json:"agreement_gate,omitempty"`
	KLDivergence      *float64   `json:"kl_divergence,omitempty"`
	Top1Agreement     *float64   `json:"top1_agreement,omitempty"`
	SizeBytes         *int64     `json:"size_bytes,omitempty"`
	DecodeCeilingTokS *float64   `json:"decode_ceiling_tok_s,omitempty"`
	MemoryFit         *MemoryFit `json:"memory_fit,omitempty"`
	Bench             *Bench     `json:"bench,omitempty"`
	// VisionBench is an image classifier's on-host measurement, in place
	// of Bench (which times tokens).
	VisionBench *VisionBench `json:"vision_bench,omitempty"`
	// Generation is what the target's decode check measured: the
	// artifact's token-by-token decode against its own prefill, and its
	// greedy generations against the unconverted model's.
	Generation *Generation `json:"generation,omitempty"`
	// Checks lists which validations ran and how they ended.
	Checks []Check `json:"checks,omitempty"`
}

// Verdicts of the perplexity gate.
const (
	VerdictExcellent = "excellent"
	VerdictOK        = "ok"
	VerdictFail      = "fail"
)

// Perplexity is the quality gate's measurement: baseline and converted
// model on the same tokens. Delta = Converted - Baseline,
// Ratio = Converted / Baseline.
type Perplexity struct {
	Baseline  float64 `json:"baseline"`
	Converted float64 `json:"converted"`
	Delta     float64 `json:"delta"`
	Ratio     float64 `json:"ratio"`
	Verdict   string  `json:"verdict"`
	// WarnDelta and MaxDelta are the thresholds the verdict was judged by.
	WarnDelta  float64 `json:"warn_delta"`
	MaxDelta   float64 `json:"max_delta"`
	EvalTokens int     `json:"eval_tokens"`
	Context    int     `json:"context"`
	Chunks     int     `json:"chunks"`
	// Backend is the runtime that evaluated both models (llama.cpp, onnxruntime).
	Backend string `json:"backend"`
	// DeltaCI95 is the delta's 95% interval, [low, high], and Interval
	// how it was found; TokensToDecide, when the interval straddles
	// MaxDelta, about how many scored tokens would put it on one side.
	DeltaCI95      *[2]float64 `json:"delta_ci95,omitempty"`
	Interval       string      `json:"interval,omitempty"`
	TokensToDecide int         `json:"tokens_to_decide,omitempty"`
}

// Accuracy is an image classifier's quality gate: top-1 accuracy of the
// reference (the fp32 PyTorch model) and of the converted model on the
// same labelled images; Drop = Reference - Converted, as a fraction.
type Accuracy struct {
	Reference float64 `json:"reference"`
	Converted float64 `json:"converted"`
	Drop      float64 `json:"drop"`
	MaxDrop   float64 `json:"max_drop"`
	Verdict   string  `json:"verdict"`
	Images    int     `json:"images"`
	// Agreement is the share of images both models put in the same class.
	Agreement *float64 `json:"agreement,omitempty"`
	// Backend and ReferenceBackend are the runtimes that scored them.
	Backend          string `json:"backend"`
	ReferenceBackend string `json:"reference_backend"`
}

// Agreement is an image classifier's agreement gate: the share of the
// evaluation images on which the converted model's top-1 class is the
// reference's (the fp32 PyTorch model). It needs no labels; it is not
// accuracy (a model wrong the same way as the reference agrees).
type Agreement struct {
	Agreement float64 `json:"agreement"`
	Min       float64 `json:"min"`
	Verdict   string  `json:"verdict"`
	Images    int     `json:"images"`
	// Labelled is false for an unlabelled set (no accuracy measured).
	Labelled         bool   `json:"labelled"`
	Backend          string `json:"backend"`
	ReferenceBackend string `json:"reference_backend"`
}

// Generation is a decode check's measurement. The artifact, in its runtime
// (or the closest host equivalent, named in Runtime), decodes each
// reference sequence token by token through its KV cache, teacher-forced
// on the unconverted model's greedy tokens from the built-in chat prompts,
// and prefills it in one pass.
type Generation struct {
	Runtime string `json:"runtime"`
	// Sequences are the reference sequences, Steps the decoded positions
	// compared over all of them; MaxNewTokens the reference's cap.
	Sequences    int `json:"sequences"`
	Steps        int `json:"steps"`
	MaxNewTokens int `json:"max_new_tokens"`
	// DecodeMaxAbs is the largest |decode logit - prefill logit| at any
	// decoded position, DecodeTop1 the share of positions whose argmax
	// agree; DecodeBound and DecodeMinTop1 are the format's bounds on them.
	// All nil when the runtime has no KV-cache decode to check
	// (NotApplicable says why).
	DecodeMaxAbs  *float64 `json:"decode_max_abs,omitempty"`
	DecodeTop1    *float64 `json:"decode_top1,omitempty"`
	DecodeBound   *float64 `json:"decode_bound,omitempty"`
	DecodeMinTop1 *float64 `json:"decode_min_top1,omitempty"`
	NotApplicable string   `json:"decode_not_applicable,omitempty"`
	// TokenAgreement is the share of steps at which the artifact's most
	// likely token is the original's greedy token; FirstDivergence the
	// earliest step (0-based) at which a sequence disagreed, absent when
	// none did; MeanKL the mean KL divergence from the original's top-32
	// distribution (the rest of the vocabulary as one bucket), null when
	// it was not finite.
	TokenAgreement  float64  `json:"token_agreement"`
	FirstDivergence *int     `json:"first_divergence,omitempty"`
	MeanKL          *float64 `json:"mean_kl"`
	// StopsLikeOriginal: where the original stopped at EOS, the artifact
	// picked EOS there too; absent when no reference sequence stopped.
	StopsLikeOriginal *bool `json:"stops_like_original,omitempty"`
	// CrossesWindow: a sequence's decode crossed the model's sliding
	// window; absent for a model without one.
	CrossesWindow *bool `json:"crosses_window,omitempty"`
	// MinTokenAgreement and MaxMeanKL are the recipe's bounds
	// (quality.generation) the target was judged by.
	MinTokenAgreement float64 `json:"min_token_agreement"`
	MaxMeanKL         float64 `json:"max_mean_kl"`
}

// MemoryFit is the plan-time memory pre-flight for the target's device:
// weights + KV cache + runtime overhead against the memory left after the OS.
type MemoryFit struct {
	Device         string `json:"device"`
	WeightsBytes   int64  `json:"weights_bytes"`
	KVCacheBytes   int64  `json:"kv_cache_bytes"`
	OverheadBytes  int64  `json:"overhead_bytes"`
	TotalBytes     int64  `json:"total_bytes"`
	AvailableBytes int64  `json:"available_bytes"`
	Context        int    `json:"context"`
	KVDtype        string `json:"kv_dtype"`
	Fits           bool   `json:"fits"`
}

// Bench is an on-host measurement of the artifact at a fixed input shape:
// each timed run decodes one token with PromptTokens already in the KV
// cache (DecodeTokens counts them), and, separately, processes one
// PromptTokens prompt (FirstTokenMS is the median of those).
type Bench struct {
	Backend string `json:"backend"`
	// Host names the machine measured (OS/arch, CPU model, cores).
	Host         string `json:"host,omitempty"`
	WarmupRuns   int    `json:"warmup_runs"`
	TimedRuns    int    `json:"timed_runs"`
	PromptTokens int    `json:"prompt_tokens"`
	DecodeTokens int    `json:"decode_tokens"`
	Threads      int    `json:"threads,omitempty"`
	// ModelBytes is what the host ceiling divides the bandwidth by.
	ModelBytes   int64   `json:"model_bytes,omitempty"`
	TokenP50MS   float64 `json:"token_p50_ms"`
	TokenP95MS   float64 `json:"token_p95_ms"`
	TokenP99MS   float64 `json:"token_p99_ms"`
	FirstTokenMS float64 `json:"first_token_ms"`
	PromptTokS   float64 `json:"prompt_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	// HostBandwidthGBs and HostCeilingTokS are absent when the bandwidth
	// test did not run.
	HostBandwidthGBs *float64 `json:"host_bandwidth_gb_s,omitempty"`
	HostCeilingTokS  *float64 `json:"host_ceiling_tok_s,omitempty"`
	// Efficiency is DecodeTokS / HostCeilingTokS.
	Efficiency *float64 `json:"efficiency,omitempty"`
}

// Check is one validation that ran on the artifact.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// Budgets are the target's declared budgets with what plan predicted and,
// where measured, what the artifact achieved. Unset budgets are absent.
type Budgets struct {
	MinTokensPerS   *Budget `json:"min_tokens_per_s,omitempty"`
	MaxMemoryGB     *Budget `json:"max_memory_gb,omitempty"`
	MaxFirstTokenMS *Budget `json:"max_first_token_ms,omitempty"`
}

// Budget is one budget: its limit, the plan-time prediction and the
// measurement, each absent when unknown.
type Budget struct {
	Limit     float64  `json:"limit"`
	Predicted *float64 `json:"predicted,omitempty"`
	Actual    *float64 `json:"actual,omitempty"`
}

// Toolchain is one provisioned toolchain's identity.
type Toolchain struct {
	LockDigest string            `json:"lock_digest"`
	Versions   map[string]string `json:"versions,omitempty"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// listsArtifact: the artifact is a listed file, or a package (a folder
// such as NAME.mlpackage) that listed files are in.
func listsArtifact(files []File, artifact string) bool {
	for _, f := range files {
		if f.Path == artifact || strings.HasPrefix(f.Path, artifact+"/") {
			return true
		}
	}
	return false
}

// Validate reports every inconsistency in m that would make the manifest
// useless to verify or reproduce from, joined into one error.
func (m *Manifest) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if m.ManifestVersion != Version {
		add("manifest_version is %d, want %d", m.ManifestVersion, Version)
	}
	if m.EdgepipeVersion == "" {
		add("edgepipe_version is empty")
	}
	if m.Recipe.Name == "" {
		add("recipe.name is empty")
	}
	if m.Recipe.SHA256 != "" && !sha256Hex.MatchString(m.Recipe.SHA256) {
		add("recipe.sha256 %q is not 64 lowercase hex digits", m.Recipe.SHA256)
	}
	if m.Target.Name == "" {
		add("target.name is empty")
	}
	errs = append(errs, validateFiles("files", m.Files)...)
	for _, f := range m.Files {
		if f.Path == FileName {
			add("files lists %s, which cannot record its own digest", FileName)
		}
		if IsSidecar(f.Path) {
			add("files lists %s, which records the manifest's digest and so cannot be listed in it", f.Path)
		}
	}
	if a := m.Target.Artifact; a != "" && !listsArtifact(m.Files, a) {
		add("target.artifact %q is not among files, nor a folder of them", a)
	}
	errs = append(errs, validateFiles("source.files", m.Source.Files)...)

	seen := map[string]bool{}
	for i, s := range m.Steps {
		switch {
		case s.ID == "":
			add("steps[%d].id is empty", i)
		case seen[s.ID]:
			add("steps[%d].id %q appears twice", i, s.ID)
		}
		seen[s.ID] = true
		if s.Kind == "" {
			add("step %q has no kind", s.ID)
		}
		if s.Toolchain != "" {
			if _, ok := m.Toolchains[s.Toolchain]; !ok {
				add("step %q names toolchain %q, which toolchains does not record", s.ID, s.Toolchain)
			}
		}
		if s.DurationS < 0 || math.IsNaN(s.DurationS) || math.IsInf(s.DurationS, 0) {
			add("step %q has duration_s %v", s.ID, s.DurationS)
		}
	}

	if p := m.Metrics.Perplexity; p != nil {
		errs = append(errs, p.validate()...)
	}
	if b := m.Metrics.Bench; b != nil {
		errs = append(errs, b.validate()...)
	}
	if b := m.Metrics.VisionBench; b != nil {
		errs = append(errs, b.validate()...)
	}
	for i, c := range m.Metrics.Checks {
		if c.Name == "" {
			add("metrics.checks[%d].name is empty", i)
		}
	}
	return errors.Join(errs...)
}

func (p *Perplexity) validate() []error {
	var errs []error
	for name, v := range map[string]float64{
		"baseline": p.Baseline, "converted": p.Converted, "delta": p.Delta, "ratio": p.Ratio,
		"warn_delta": p.WarnDelta, "max_delta": p.MaxDelta,
	} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("metrics.perplexity.%s is %v", name, v))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if p.Baseline <= 0 || p.Converted <= 0 {
		errs = append(errs, fmt.Errorf("metrics.perplexity: baseline %v and converted %v must both be positive (a perplexity is at least 1)", p.Baseline, p.Converted))
		return errs
	}
	// Delta and ratio are derived; a mismatch means a caller filled them from
	// different runs, and the verdict would be judged on numbers not shown.
	if !near(p.Delta, p.Converted-p.Baseline) {
		errs = append(errs, fmt.Errorf("metrics.perplexity.delta %v is not converted - baseline (%v)", p.Delta, p.Converted-p.Baseline))
	}
	if !near(p.Ratio, p.Converted/p.Baseline) {
		errs = append(errs, fmt.Errorf("metrics.perplexity.ratio %v is not converted / baseline (%v)", p.Ratio, p.Converted/p.Baseline))
	}
	switch p.Verdict {
	case VerdictExcellent, VerdictOK, VerdictFail:
	default:
		errs = append(errs, fmt.Errorf("metrics.perplexity.verdict %q is not one of excellent, ok, fail", p.Verdict))
	}
	return errs
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func validateFiles(field string, files []File) []error {
	var errs []error
	seen := map[string]bool{}
	for i, f := range files {
		if err := CheckRelPath(f.Path); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", field, i, err))
			continue
		}
		if seen[f.Path] {
			errs = append(errs, fmt.Errorf("%s[%d]: %s appears twice", field, i, f.Path))
		}
		seen[f.Path] = true
		if !sha256Hex.MatchString(f.SHA256) {
			errs = append(errs, fmt.Errorf("%s[%d]: %s: sha256 %q is not 64 lowercase hex digits", field, i, f.Path, f.SHA256))
		}
		if f.Size < 0 {
			errs = append(errs, fmt.Errorf("%s[%d]: %s: negative size %d", field, i, f.Path, f.Size))
		}
	}
	return errs
}
