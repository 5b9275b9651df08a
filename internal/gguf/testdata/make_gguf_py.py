"""Writes gguf-py.gguf with llama.cpp's own writer (gguf-py's GGUFWriter), so the Go
reader is checked against a file it did not write: every metadata value type, arrays
of numbers, strings and arrays, quantized and float tensors, a 64-byte alignment.

    python make_gguf_py.py   (with the llama toolchain's Python: it has gguf and numpy)
"""

import numpy as np
import gguf

w = gguf.GGUFWriter("gguf-py.gguf", "llama")
w.add_custom_alignment(64)
w.add_uint8("test.u8", 200)
w.add_int8("test.i8", -100)
w.add_uint16("test.u16", 60000)
w.add_int16("test.i16", -30000)
w.add_uint32("test.u32", 4000000000)
w.add_int32("test.i32", -2000000000)
w.add_float32("test.f32", 1.5)
w.add_bool("test.bool", True)
w.add_string("test.str", "héllo")
w.add_uint64("test.u64", 18000000000000000000)
w.add_int64("test.i64", -9000000000000000000)
w.add_float64("test.f64", -2.25)
w.add_array("test.arr_i32", [1, -2, 3])
w.add_array("test.arr_str", ["a", "bc", ""])
w.add_array("test.arr_arr", [[1, 2], [3]])
w.add_block_count(2)
w.add_context_length(4096)
w.add_embedding_length(256)
w.add_head_count(4)
w.add_head_count_kv(2)
w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
w.add_tensor("f32", np.arange(8, dtype=np.float32))
w.add_tensor("f16", np.zeros((3, 32), dtype=np.float16))
# A Q4_K tensor of 2 rows of 256 elements: 2 blocks of 144 bytes, raw.
w.add_tensor("q4k", np.zeros((2, 144), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
