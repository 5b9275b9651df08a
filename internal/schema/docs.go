package schema

import (
	"strconv"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
func itoa(i int) string     { return strconv.Itoa(i) }

// fieldDoc is what the schema says about one recipe key beyond its Go type.
// The bounds mirror what pipelines/parse.go enforces for that key.
type fieldDoc struct {
	Desc     string
	Required bool
	// Nullable keys may be left empty (key: with no value): the parser
	// then keeps the defaults.
	Nullable bool
	// Key marks the field that is written as its entry's mapping key
	// (targets: NAME: ...), not as a key inside the entry.
	Key      bool
	Min      *float64
	Default  any
	Examples []any
	// Schema replaces the schema reflection would give; Shape adjusts it.
	Schema func() *Schema
	Shape  func(s *Schema)
}

var (
	zero = ptr(0.0)
	one  = ptr(1.0)
)

// typeDocs describes each struct of the recipe, keyed by Go type name.
var typeDocs = map[string]string{
	"Recipe":            "A recipe: which model to convert, into which formats for which devices, and the quality gate each artifact must pass before it is published.",
	"Model":             "The weights to convert, and what they are allowed to contain.",
	"Data":              "The calibration and evaluation texts: builtin:NAME, or a text file path relative to the recipe.",
	"Quality":           "The quality gate every target must pass before it is published.",
	"AccuracyGate":      "Top-1 accuracy of the converted classifier against the fp32 PyTorch model, on the same labelled images: drop = reference - converted, a fraction.",
	"AgreementGate":     "Top-1 agreement of the converted classifier with the fp32 PyTorch model: the share of the evaluation images on which both pick the same class. It needs no labels (an unlabelled set such as builtin:skimage-photos); it measures faithfulness to the fp32 model, not accuracy.",
	"GenerationGate":    "Generation agreement with the unconverted model (text generation): the artifact, in its runtime or the closest host equivalent, decodes the original's greedy generations from the built-in chat prompts token by token through its KV cache; its most likely tokens and distributions are compared with the original's at every step.",
	"PerplexityGate":    "Perplexity of the converted model against the unconverted baseline, on the same tokens: delta = converted - baseline.",
	"Resources":         "Caps on what the executor uses at once; unset means the machine's.",
	"Target":            "One published artifact: the model in one format for one device. Its name (the key) names the artifact folder.",
	"StepSpec":          "A step of your own (uses, needs, with), or, under a generated step's id (gguf-quantize:q4_k_m, ...), an override of that step's with: options.",
	"ToolchainOverride": "Tools you already have, used instead of the toolchain edgepipe installs.",
	"BenchSpec":         "The on-host measurement's settings.",
}

// fieldDocs describes each recipe key, keyed by Go type and field name.
var fieldDocs = map[string]fieldDoc{
	"Recipe.Edgepipe": {Desc: "Recipe format version; this edgepipe reads version 1.", Required: true,
		Schema: func() *Schema { return &Schema{Type: "integer", Const: recipe.FormatVersion} }},
	"Recipe.Name": {Desc: "Names the recipe and its artifact folder (artifacts/NAME): lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.",
		Required: true, Schema: func() *Schema { return nameSchema() }},
	"Recipe.Description": {Desc: "What the recipe is for, in words.", Nullable: true},
	"Recipe.Task": {Desc: "What the model does: text-generation (the default: LLM formats, gated on perplexity) or image-classification (vision formats onnx-fp32 and onnx-int8, labelled image sets as data, gated on top-1 accuracy).",
		Default: recipe.TaskTextGeneration, Shape: func(s *Schema) { s.Enum = []any{recipe.TaskTextGeneration, recipe.TaskImageClassification} }},
	"Recipe.Model":     {Desc: "The weights to convert.", Required: true},
	"Recipe.Data":      {Desc: "The calibration and evaluation texts; both default to the built-in ones.", Nullable: true},
	"Recipe.Quality":   {Desc: "The quality gate defaults every target starts from.", Nullable: true},
	"Recipe.Resources": {Desc: "Caps on memory and parallel steps; unset means the machine's.", Nullable: true},
	"Recipe.Bench": {Desc: "Image-classification recipes only: the on-host measurement every target takes (a target's own bench: overrides its keys). Text-generation recipes write bench: per target.",
		Nullable: true},
	"Recipe.Targets": {Desc: "The artifacts to build, by name. Each name becomes a folder under the artifact folder.",
		Required: true, Shape: func(s *Schema) {
			s.PropertyNames = nameSchema()
			s.MinProperties = ptr(1)
		}},
	"Recipe.Steps": {Desc: "Extra steps of your own, by name, or overrides of generated steps by id (`edgepipe plan RECIPE` lists the ids).",
		Nullable: true, Shape: func(s *Schema) {
			// A new step needs uses:; an override keeps the generated kind.
			ref := s.AdditionalProperties.(*Schema)
			s.AdditionalProperties = false
			s.PatternProperties = map[string]*Schema{
				NamePattern:       {AllOf: []*Schema{ref}, Required: []string{"uses"}},
				OverrideIDPattern: {AllOf: []*Schema{ref}},
			}
			s.PropertyNames = &Schema{AnyOf: []*Schema{nameSchema(),
				{Pattern: OverrideIDPattern, MaxLength: ptr(2 * recipe.MaxNameLen)}}}
		}},
	"Recipe.Toolchains": {Desc: "Use your own tools instead of the pinned toolchains, by toolchain name (`edgepipe doctor` lists them).", Nullable: true},

	"Model.Source": {Desc: "Where the weights come from: hf://OWNER/REPO[@REVISION], builtin:NAME (smollm2-135m, gemma3-270m, mobilenetv3-small-digits, efficientnet-lite0, and the tiny models of each architecture that test conversions: tiny-llama, tiny-qwen2, tiny-qwen3, tiny-gemma3, tiny-phi3, tiny-mistral, tiny-qwen3-moe, tiny-mixtral), https://..., s3::https://..., git::https://..., a local folder relative to the recipe, or a GGUF file (./model.gguf, https://.../model.gguf, or a folder holding one), dequantized into a checkpoint first.",
		Required: true, Examples: []any{"builtin:smollm2-135m", "hf://HuggingFaceTB/SmolLM2-135M-Instruct@main", "./weights", "./model-Q4_K_M.gguf"}},
	"Model.Name": {Desc: "What published files are named after: a GGUF target's file is NAME-q8_0.gguf, a Core ML target's NAME.mlpackage, a TFLite one's NAME.tflite (formats whose runtime reads fixed names inside a folder, such as ONNX, MLC or a Hugging Face checkpoint, keep them). Default: the source's name: a builtin's, a Hugging Face repository's, the file or folder a path or URL names, without a GGUF's quantization suffix.",
		Examples: []any{"SmolLM2-135M-Instruct"}, Shape: func(s *Schema) { s.Pattern = recipe.ModelNamePattern }},
	"Model.AllowPickle":     {Desc: "Accept pickled weights (.bin, .pt, .pth, .ckpt, .pkl), which can run code when loaded. Default: refuse them.", Default: false},
	"Model.TrustRemoteCode": {Desc: "Accept repositories that ship their own model code. Default: refuse them.", Default: false},

	"Data.Calibration": {Desc: "Text for calibration (imatrix, GPTQ, AWQ, ...), or for an image-classification recipe a labelled image set (.npz; default builtin:digits-calibration): builtin:NAME or a file path relative to the recipe.",
		Default: recipe.DefaultCalibration, Examples: []any{recipe.DefaultCalibration, "data/calibration.txt"}},
	"Data.Eval": {Desc: "Text the perplexity gate is measured on, or for an image-classification recipe the image set (.npz; default builtin:digits-test, labelled; builtin:skimage-photos has no labels and needs quality.agreement) the accuracy or agreement gate is: builtin:NAME or a file path relative to the recipe.",
		Default: recipe.DefaultEval, Examples: []any{recipe.DefaultEval, "data/eval.txt"}},
	"Data.AllowOverlap": {Desc: "Accept calibration data that overlaps the evaluation data (the same bytes; texts sharing a 256-byte stretch, whitespace runs as one space; image sets sharing 1% or more of the evaluation images), which is refused by default: a gate scored on what the model was calibrated on flatters it.",
		Default: false},

	"Quality.Perplexity": {Desc: "The perplexity gate (text generation only).", Nullable: true},
	"Quality.Accuracy":   {Desc: "The top-1 accuracy gate (task: image-classification only; the default gate, max_drop 0.01, unless the recipe sets quality.agreement).", Nullable: true},
	"Quality.Generation": {Desc: "The generation agreement gate (text generation only; defaults min_token_agreement " + ftoa(recipe.DefaultMinTokenAgreement) + ", max_mean_kl " + ftoa(recipe.DefaultMaxMeanKL) + ", max_new_tokens " + itoa(recipe.DefaultMaxNewTokens) + "), checked by the targets whose formats have a decode check.", Nullable: true},
	"Quality.Agreement":  {Desc: "The top-1 agreement gate (task: image-classification only; default min 0.99): for an unlabelled evaluation set, in place of quality.accuracy; with both set, both apply.", Nullable: true},

	"AccuracyGate.MaxDrop": {Desc: "A top-1 drop over this fraction (0.01: one percentage point) fails the gate: the target is not published and the run exits 3.",
		Min: zero, Default: recipe.DefaultMaxAccuracyDrop},
	"AgreementGate.Min": {Desc: "An agreement under this fraction of the images (0.99: 99%) fails the gate: the target is not published and the run exits 3.",
		Min: zero, Default: recipe.DefaultMinAgreement},

	"GenerationGate.MinTokenAgreement": {Desc: "A share of decode steps (0.9: 90%) at which the artifact's most likely token is the original's greedy token under this fails the target: it is not published and the run exits 3.",
		Min: zero, Default: recipe.DefaultMinTokenAgreement},
	"GenerationGate.MaxMeanKL": {Desc: "A mean KL divergence (nats) of the artifact's next-token distribution from the original's (its top 32 tokens and the rest as one bucket) over this fails the target.",
		Min: zero, Default: recipe.DefaultMaxMeanKL},
	"GenerationGate.MaxNewTokens": {Desc: "Tokens the original generates at most from each chat prompt (it stops earlier at end of sequence), " + itoa(recipe.MaxMaxNewTokens) + " at most; each is decoded again by every target's artifact.",
		Min: one, Default: recipe.DefaultMaxNewTokens},

	"PerplexityGate.Context":   {Desc: "Tokens per evaluation chunk (llama-perplexity -c).", Min: one, Default: recipe.DefaultPPLContext},
	"PerplexityGate.WarnDelta": {Desc: "A delta under this is excellent; between this and max_delta is ok.", Min: zero, Default: recipe.DefaultWarnDelta},
	"PerplexityGate.MaxDelta":  {Desc: "A delta over this fails the gate: the target is not published and the run exits 3.", Min: zero, Default: recipe.DefaultMaxDelta},
	"PerplexityGate.MaxChunks": {Desc: "Evaluate at most this many chunks, bounding the gate's cost; 0 evaluates the whole text.", Min: zero, Default: 0},

	"Resources.MaxMemoryGB": {Desc: "Memory budget in GB (1e9 bytes, as every memory figure edgepipe prints) for the steps running at once; 0 means the machine's.", Min: zero},
	"Resources.Jobs":        {Desc: "Steps run at once; 0 means one per core.", Min: zero},

	"Target.Name": {Key: true},
	"Target.Device": {Desc: "The device the artifact is for: an id (or alias) from `edgepipe devices`.", Required: true,
		Schema: func() *Schema { return deviceSchema() }},
	"Target.Format": {Desc: "The format to convert to; the device's runtime must load it.", Required: true,
		Schema: func() *Schema { return formatSchema() }},
	"Target.Context": {Desc: "Context length the artifact is built and checked for (memory pre-flight, runtime config).", Min: one},
	"Target.KVDtype": {Desc: "KV-cache element type the runtime will use.", Default: recipe.DefaultKVDtype,
		Schema: func() *Schema { return kvDtypeSchema() }},
	"Target.Quality": {Desc: "This target's quality gate: of the perplexity gate it may override only max_delta; its generation gate (bounds and max_new_tokens) is its own.", Nullable: true,
		Schema: targetQuality},
	"Target.With":            {Desc: "Format options, typed per format family (imatrix for GGUF, block_size and symmetric for ONNX INT4, backend for QNN, kv_cache for Core ML, group_size for GPTQ and AWQ, ...); an unknown key or a value of the wrong type is an error.", Nullable: true},
	"Target.MinTokensPerS":   {Desc: "Budget: decode speed the device must reach, in tokens per second, checked against its decode ceiling before anything runs; 0 means unset.", Min: zero},
	"Target.MaxMemoryGB":     {Desc: "Budget: memory in GB (1e9 bytes, the device catalog's unit) the model, its KV cache and the runtime may take on the device; 0 means unset.", Min: zero},
	"Target.MaxFirstTokenMS": {Desc: "Budget: time to first token in milliseconds; with bench on, the measured time over it fails the target (exit 3); 0 means unset.", Min: zero},
	"Target.Bench": {Desc: "Measure the artifact on this host. Text generation (GGUF through llama.cpp's llama-bench, onnx-fp32/onnx-int4 through ONNX Runtime): per-token decode latency p50/p95/p99, time to first token, prompt and decode tok/s, and the host's memory bandwidth, so decode speed is reported against the host's own ceiling; with bench on, min_tokens_per_s and max_first_token_ms are judged against the measurement. Image classification (in the runtime that gated the target: ONNX Runtime for onnx-fp32/onnx-int8, the LiteRT interpreter for tflite-int8): single-inference latency p50/p95/p99, images/s and the process's peak memory. An empty bench: uses the defaults.",
		Nullable: true},

	"BenchSpec.Warmup":       {Desc: "Runs timed and discarded before the timed ones (caches, page faults, thread pools).", Min: zero, Default: recipe.DefaultBenchWarmup},
	"BenchSpec.Runs":         {Desc: "Timed runs: each decodes one token, and separately processes one prompt; or classifies one batch.", Min: one, Default: recipe.DefaultBenchRuns},
	"BenchSpec.PromptTokens": {Desc: "Text generation only: the fixed input shape, the prompt's length and the KV-cache depth every decoded token is timed at.", Min: one, Default: recipe.DefaultBenchPromptTokens},
	"BenchSpec.Batch":        {Desc: "Image classification only: images per timed inference, at the model's input size (config.json's input_size and in_channels).", Min: one, Default: recipe.DefaultBenchBatch},
	"BenchSpec.Threads":      {Desc: "Threads the runtime uses; 0 means every core.", Min: zero, Default: 0},
	"BenchSpec.ProbeMiB":     {Desc: "Text generation only: size in MiB of the buffer the memory-bandwidth test streams; keep it well above the CPU's last-level cache.", Min: one, Default: recipe.DefaultBenchProbeMiB},
	"Target.Publish": {Desc: "Remotes the target is pushed to after its local folder is published and verified: an OCI registry (oci://HOST[:PORT]/REPOSITORY[:TAG]; the tag defaults to the target's name) or S3-compatible storage (s3::https://HOST/BUCKET/PREFIX; a prefix ending in / gets the target's name). Credentials come from the Docker config or the AWS SDK's chain, never the recipe; plain HTTP only to localhost unless the entry says insecure: true.",
		Nullable: true, Schema: publishSchema,
		Examples: []any{[]any{"oci://localhost:5000/edgepipe/demo:q4_k_m"}, []any{"oci://ghcr.io/acme/models", map[string]any{"url": "oci://registry.lan:5000/models", "insecure": true}}}},

	"StepSpec.ID":       {Key: true},
	"StepSpec.Uses":     {Desc: "The kind of step to run, for example run (a command by argv, never through a shell)."},
	"StepSpec.Needs":    {Desc: "Targets or steps that must finish first; a target name means its published folder.", Nullable: true},
	"StepSpec.With":     {Desc: "The step's options; for run: argv, a list whose items may use ${NAME.outputs.OUTPUT}, and min_threads/max_threads (the cores it may be granted, told in EDGEPIPE_THREADS).", Nullable: true},
	"StepSpec.TimeoutS": {Desc: "Kill the step after this many seconds; 0 means the kind's default.", Min: zero},

	"ToolchainOverride.Python": {Desc: "A Python interpreter that has the toolchain's packages."},
	"ToolchainOverride.Tools":  {Desc: "Executable paths by tool name, for example llama-quantize: /opt/llama.cpp/bin/llama-quantize.", Nullable: true},
}

// targetQuality is a target's quality section: of the perplexity gate a
// target may tighten or loosen only max_delta, so every target is scored
// the same way; its generation gate is its own.
func targetQuality() *Schema {
	maxDelta := &Schema{Description: "A delta over this fails this target's gate; defaults to the recipe's quality.perplexity.max_delta.",
		Type: "number", Minimum: zero}
	return &Schema{Type: "object", AdditionalProperties: false, Properties: map[string]*Schema{
		"perplexity": nullable(&Schema{Description: "The perplexity gate of this target.", Type: "object", AdditionalProperties: false,
			Properties: map[string]*Schema{"max_delta": maxDelta}}),
		"generation": nullable(&Schema{Ref: "#/$defs/generation_gate", Description: "The generation agreement gate of this target; unset keys come from the recipe's quality.generation."}),
	}}
}
