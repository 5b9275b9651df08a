package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// CheckpointDigest digests a Hugging Face checkpoint's config and weights,
// refusing a folder that is not one.
func CheckpointDigest(dir string) (string, error) {
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", fmt.Errorf("no config.json in %s: not a Hugging Face checkpoint", dir)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(shards) == 0 {
		return "", fmt.Errorf("no *.safetensors in %s", dir)
	}
	return DigestFiles(cfg, shards...)
}

// DigestFiles is the hex sha256 over head and the named files' bytes.
func DigestFiles(head []byte, files ...string) (string, error) {
	h := sha256.New()
	h.Write(head)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
