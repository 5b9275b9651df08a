// Package report holds the reports of the nvidia family's helper scripts,
// decoded strictly (steps.ReadReport) by the kinds and written by the
// stand-ins; python/reports/ has a golden of each.
package report

// ModelOpt is modelopt_quantize.py's report: the quantization the exported
// checkpoint declares (hf_quant_config.json's, or the TensorRT-LLM
// checkpoint config's), "" where it declares none.
type ModelOpt struct {
	QuantAlgo        string `json:"quant_algo"`
	KVCacheQuantAlgo string `json:"kv_cache_quant_algo"`
	// GroupSize is the declared group (16 for NVFP4, 128 for INT4 AWQ):
	// 0 when the config has no group_size, null when it has a null one.
	GroupSize *int `json:"group_size"`
	// Export is hf or trtllm; ModelOpt is nvidia-modelopt's version.
	Export   string `json:"export"`
	ModelOpt string `json:"modelopt"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"modelopt_quantize.py": func() any { return &ModelOpt{} },
}
