package edge

import "fmt"

// kvCatalogNames maps a recipe's kv_dtype to the catalog's KV cache type:
// q8 and q4 are llama.cpp's block types (q8_0, q4_0, 32 elements a block),
// fp8 is vLLM's E4M3 cache.
var kvCatalogNames = map[string]string{
	"f16": "f16",
	"q8":  "q8_0",
	"q4":  "q4_0",
	"fp8": "fp8",
}

// DefaultKVDtype is the KV cache type when a target sets none.
const DefaultKVDtype = "f16"

// quantizedKV are the cache types a memory fix may suggest, in the order
// that loses the least precision first.
var quantizedKV = []string{"q8", "q4"}

func catalogKV(kv string) (string, error) {
	if kv == "" {
		kv = DefaultKVDtype
	}
	name, ok := kvCatalogNames[kv]
	if !ok {
		return "", fmt.Errorf("kv_dtype %q is not one of f16, q8, q4, fp8", kv)
	}
	return name, nil
}
