// Package report holds the reports of the shared kinds' helper scripts,
// one named type per helper, decoded strictly (steps.DecodeReport) by the
// kinds and written by the stand-ins; python/reports/ has a golden of each.
package report

// GGUFToHF is gguf_to_hf.py's report (also written to its --info file):
// the checkpoint it made of a GGUF and what the GGUF held.
type GGUFToHF struct {
	Out          string `json:"out"`
	Parameters   int64  `json:"parameters"`
	Architecture string `json:"architecture"`
	// Tokenizer says how the tokenizer was rebuilt (rebuilt-from-gguf,
	// sentencepiece-from-gguf, transformers-gguf).
	Tokenizer string `json:"tokenizer"`
	AddBOS    bool   `json:"add_bos"`
	// FileType is the GGUF's declared type (llama.cpp's name, Q4_K_M);
	// TensorTypes counts the tensors of each type it really holds.
	FileType    string         `json:"file_type"`
	TensorTypes map[string]int `json:"tensor_types"`
	Files       []string       `json:"files"`
}

// Perplexity is the report of hf_perplexity.py and of the scripts that
// wrap it in other toolchains (llmc_perplexity.py): the model's perplexity
// on the text in llama-perplexity's scheme.
type Perplexity struct {
	PPL    float64 `json:"ppl"`
	Tokens int     `json:"tokens"`
	Chunks int     `json:"chunks"`
	Ctx    int     `json:"ctx"`
	Scored int     `json:"scored"`
	AddBOS bool    `json:"add_bos"`
	// KLDivergence and Top1Agreement compare the model with a baseline's
	// top tokens (--baseline-scores); null for the baseline itself.
	KLDivergence  *float64 `json:"kl_divergence"`
	Top1Agreement *float64 `json:"top1_agreement"`
}

// Contract is contract.py's report: the behavioural contract between the
// source checkpoint and a converted artifact, one entry per check.
type Contract struct {
	// Artifact is how the artifact was read (gguf, mlc, folder) and Path
	// what was read: the GGUF file, or the artifact's folder.
	Artifact string `json:"artifact"`
	Path     string `json:"path"`
	// CorpusTexts counts the corpus's texts: each non-empty line, and the
	// whole corpus as one text.
	CorpusTexts int           `json:"corpus_texts"`
	Tokenizer   ContractCheck `json:"tokenizer"`
	// SourceGGUF compares llama.cpp's reading of the source's own GGUF
	// with the checkpoint's tokenizer; null when the source is no GGUF
	// the step was given.
	SourceGGUF   *ContractCheck `json:"source_gguf"`
	EOS          ContractCheck  `json:"eos"`
	BOS          ContractCheck  `json:"bos"`
	ChatTemplate ContractCheck  `json:"chat_template"`
}

// ContractCheck is one check of the contract: what the source says, what
// the artifact says, and whether they agree (passed, failed), or why the
// check could not apply (skipped, Detail saying why).
type ContractCheck struct {
	Status   string `json:"status"`
	Source   string `json:"source"`
	Artifact string `json:"artifact"`
	Detail   string `json:"detail"`
	// Differing are the first corpus texts the two sides tokenize or
	// decode differently (tokenizer checks only; empty otherwise).
	Differing []DifferingText `json:"differing"`
}

// Contract check statuses.
const (
	ContractPassed  = "passed"
	ContractFailed  = "failed"
	ContractSkipped = "skipped"
)

// DifferingText is a corpus text on which the two tokenizers disagree.
type DifferingText struct {
	// Line is the text's line in the corpus (1-based); 0 is the whole
	// corpus as one text.
	Line        int    `json:"line"`
	Text        string `json:"text"`
	SourceIDs   []int  `json:"source_ids"`
	ArtifactIDs []int  `json:"artifact_ids"`
	// Decoded is what the artifact's tokenizer decodes its ids to.
	Decoded *string `json:"decoded"`
}

// GenerateReference is generate_reference.py's report: the reference
// file it wrote beside it and what the unconverted model generated.
type GenerateReference struct {
	// Reference is the file's name in the step's output (reference.json).
	Reference string `json:"reference"`
	// Sequences counts the chat prompts plus, for a sliding-window model,
	// the window sequence; GeneratedTokens all their tokens, StoppedAtEOS
	// the sequences that ended at an end-of-sequence token.
	Sequences       int   `json:"sequences"`
	GeneratedTokens int   `json:"generated_tokens"`
	StoppedAtEOS    int   `json:"stopped_at_eos"`
	MaxNewTokens    int   `json:"max_new_tokens"`
	ChatTemplate    bool  `json:"chat_template"`
	EOSIDs          []int `json:"eos_ids"`
	// SlidingWindow is the model's attention window (null without one);
	// CrossesWindow whether the window sequence's decode crossed it (null
	// without a window).
	SlidingWindow *int   `json:"sliding_window"`
	CrossesWindow *bool  `json:"crosses_window"`
	Cache         string `json:"cache"`
	Transformers  string `json:"transformers"`
	Torch         string `json:"torch"`
}

// Decode is the report of every family's decode helper (llmc_decode.py,
// mlc_decode.py, ...; pipelines/pylib/decode_check.py measures): the
// artifact's token-by-token decode through its KV cache against its own
// one-pass prefill, and against the unconverted model's greedy tokens.
type Decode struct {
	// Runtime names what ran the artifact and its KV cache.
	Runtime      string `json:"runtime"`
	Sequences    int    `json:"sequences"`
	Steps        int    `json:"steps"`
	MaxNewTokens int    `json:"max_new_tokens"`
	// DecodeMaxAbs and DecodeTop1 compare decode with prefill: null when
	// not finite, or not measured (NotApplicable says why).
	DecodeMaxAbs   *float64 `json:"decode_max_abs"`
	DecodeTop1     *float64 `json:"decode_top1"`
	TokenAgreement float64  `json:"token_agreement"`
	// FirstDivergence is the earliest step at which the artifact's most
	// likely token was not the reference's (null: never).
	FirstDivergence *int `json:"first_divergence"`
	// MeanKL is null when it is not finite.
	MeanKL *float64 `json:"mean_kl"`
	// StopsLikeOriginal is null when no reference sequence stopped at
	// EOS, CrossesWindow when the model has no sliding window.
	StopsLikeOriginal *bool            `json:"stops_like_original"`
	CrossesWindow     *bool            `json:"crosses_window"`
	NotApplicable     *string          `json:"not_applicable"`
	PerSequence       []DecodeSequence `json:"per_sequence"`
}

// DecodeSequence is one reference sequence's part of a Decode report.
type DecodeSequence struct {
	ID                string   `json:"id"`
	PromptTokens      int      `json:"prompt_tokens"`
	Steps             int      `json:"steps"`
	DecodeMaxAbs      *float64 `json:"decode_max_abs"`
	DecodeTop1        *float64 `json:"decode_top1"`
	TokenAgreement    float64  `json:"token_agreement"`
	FirstDivergence   *int     `json:"first_divergence"`
	MeanKL            *float64 `json:"mean_kl"`
	StoppedAtEOS      bool     `json:"stopped_at_eos"`
	StopsLikeOriginal *bool    `json:"stops_like_original"`
	CrossesWindow     *bool    `json:"crosses_window"`
}

// TinyModel is tiny_model.py's report: the built-in tiny model it made
// of one architecture (builtin:tiny-ARCH).
type TinyModel struct {
	// Arch is the script's name of the architecture (--arch), Architecture
	// the transformers class that loads it.
	Arch         string `json:"arch"`
	Architecture string `json:"architecture"`
	Parameters   int64  `json:"parameters"`
	// DType is model.safetensors' (float32, or bfloat16 for the largest
	// vocabulary); its values are exact in both and in float16.
	DType     string `json:"dtype"`
	VocabSize int    `json:"vocab_size"`
	// TextTokens is how many tokens of the text shaped the output layer.
	TextTokens int      `json:"text_tokens"`
	Features   []string `json:"features"`
	// Bytes and SHA256 are model.safetensors': edgepipe pins the digest.
	Bytes   int64    `json:"bytes"`
	SHA256  string   `json:"sha256"`
	Seconds float64  `json:"seconds"`
	Files   []string `json:"files"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"contract.py":           func() any { return &Contract{} },
	"gguf_to_hf.py":         func() any { return &GGUFToHF{} },
	"hf_perplexity.py":      func() any { return &Perplexity{} },
	"generate_reference.py": func() any { return &GenerateReference{} },
	"tiny_model.py":         func() any { return &TinyModel{} },
}
