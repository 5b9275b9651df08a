package edge

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSafetensorsHeader: a downloaded file's header is hostile input; no
// header may panic the reader or yield a negative parameter count.
func FuzzSafetensorsHeader(f *testing.F) {
	header := func(json string) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, uint64(len(json)))
		b.WriteString(json)
		return b.Bytes()
	}
	f.Add(header(`{"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}}`))
	f.Add(header(`{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[4611686018427387904,4]}}`))
	f.Add(header(`{"w":{"dtype":"I8","shape":[-1]}}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("short"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "model.safetensors")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := headerParams(p)
		if err == nil && n < 0 {
			t.Fatalf("negative parameter count %d", n)
		}
	})
}

// FuzzHFConfig: config.json comes with the download; reading it for the
// model's shape must not panic on any bytes.
func FuzzHFConfig(f *testing.F) {
	f.Add([]byte(`{"num_hidden_layers": 30, "num_key_value_heads": 3, "hidden_size": 576, "num_attention_heads": 9}`))
	f.Add([]byte(`{"text_config": {"text_config": {"num_hidden_layers": -1}}, "head_dim": 0}`))
	f.Add([]byte(`{"num_attention_heads": 0, "hidden_size": 7}`))
	f.Add([]byte(`[]`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "config.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := readHFConfig(p)
		if err != nil {
			return
		}
		c.shape()
		c.missingKVFields()
		c.estimateParams()
	})
}
