package gguf

import "fmt"

// ValueType is the type of a metadata value (gguf.md's gguf_metadata_value_type).
type ValueType uint32

// The metadata value types.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
	numValueTypes
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if t < numValueTypes {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value type %d", uint32(t))
}

// size is the encoded size of a scalar value type (0 for string and array).
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one value of the type takes: a string is at
// least its 8-byte length, an array its element type and count.
func (t ValueType) minSize() uint64 {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return uint64(t.size())
}

// TensorType is a ggml tensor type (ggml.h's enum ggml_type).
type TensorType uint32

// typeInfo is how a tensor type stores its elements: blockSize elements in
// typeSize bytes (llama.cpp's gguf-py GGML_QUANT_SIZES).
type typeInfo struct {
	name                string
	blockSize, typeSize int64
}

// tensorTypes are the ggml types a GGUF may hold; the ids ggml retired
// (Q4_2, Q4_3, the Q4_0_4_4 repacks, ...) are absent, as ggml refuses them.
var tensorTypes = map[TensorType]typeInfo{
	0:  {"F32", 1, 4},
	1:  {"F16", 1, 2},
	2:  {"Q4_0", 32, 2 + 16},
	3:  {"Q4_1", 32, 2 + 2 + 16},
	6:  {"Q5_0", 32, 2 + 4 + 16},
	7:  {"Q5_1", 32, 2 + 2 + 4 + 16},
	8:  {"Q8_0", 32, 2 + 32},
	9:  {"Q8_1", 32, 2 + 2 + 32},
	10: {"Q2_K", 256, 2 + 2 + 256/16 + 256/4},
	11: {"Q3_K", 256, 2 + 256/4 + 256/8 + 12},
	12: {"Q4_K", 256, 2 + 2 + 256/2 + 12},
	13: {"Q5_K", 256, 2 + 2 + 256/2 + 256/8 + 12},
	14: {"Q6_K", 256, 2 + 256/2 + 256/4 + 256/16},
	15: {"Q8_K", 256, 4 + 256 + 256/8},
	16: {"IQ2_XXS", 256, 2 + 256/4},
	17: {"IQ2_XS", 256, 2 + 256/4 + 256/32},
	18: {"IQ3_XXS", 256, 2 + 256/4 + 256/8},
	19: {"IQ1_S", 256, 2 + 256/8 + 256/16},
	20: {"IQ4_NL", 32, 2 + 16},
	21: {"IQ3_S", 256, 2 + 256/4 + 256/8 + 256/32 + 4},
	22: {"IQ2_S", 256, 2 + 256/4 + 256/16},
	23: {"IQ4_XS", 256, 2 + 2 + 256/2 + 256/64},
	24: {"I8", 1, 1},
	25: {"I16", 1, 2},
	26: {"I32", 1, 4},
	27: {"I64", 1, 8},
	28: {"F64", 1, 8},
	29: {"IQ1_M", 256, 256/8 + 256/16 + 256/32},
	30: {"BF16", 1, 2},
	34: {"TQ1_0", 256, 2 + 4*13},
	35: {"TQ2_0", 256, 2 + 64},
	39: {"MXFP4", 32, 1 + 16},
	40: {"NVFP4", 64, 4 + 32},
	41: {"Q1_0", 128, 2 + 16},
	42: {"Q2_0", 64, 2 + 16},
}

func (t TensorType) String() string {
	if info, ok := tensorTypes[t]; ok {
		return info.name
	}
	return fmt.Sprintf("ggml type %d", uint32(t))
}

// BlockSize and TypeSize say how the type stores elements: BlockSize of
// them in TypeSize bytes; ok is false for a type ggml does not have.
func (t TensorType) BlockSize() (elems, bytes int64, ok bool) {
	info, ok := tensorTypes[t]
	return info.blockSize, info.typeSize, ok
}

// TensorTypeByName is the ggml type of a name ("Q4_K"), for writers.
func TensorTypeByName(name string) (TensorType, bool) {
	for t, info := range tensorTypes {
		if info.name == name {
			return t, true
		}
	}
	return 0, false
}

// fileTypes are llama.cpp's names of general.file_type (gguf-py's
// LlamaFileType without its MOSTLY_ prefix, as gguf_to_hf.py reports them).
var fileTypes = map[uint32]string{
	0: "ALL_F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
	28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
	37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0", 1024: "GUESSED",
}

// FileTypeName is llama.cpp's name of a general.file_type value ("Q4_K_M"),
// or "file type N" for one it does not have.
func FileTypeName(ft uint32) string {
	if name, ok := fileTypes[ft]; ok {
		return name
	}
	return fmt.Sprintf("file type %d", ft)
}

// FileTypeByName is the general.file_type value of a name, for writers.
func FileTypeByName(name string) (uint32, bool) {
	for ft, n := range fileTypes {
		if n == name {
			return ft, true
		}
	}
	return 0, false
}
