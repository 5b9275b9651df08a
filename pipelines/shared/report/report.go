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
	"gguf_to_hf.py":    func() any { return &GGUFToHF{} },
	"hf_perplexity.py": func() any { return &Perplexity{} },
	"tiny_model.py":    func() any { return &TinyModel{} },
}
