package shared

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
)

// TokenizerFiles are the files beside a model that an app needs to
// tokenize, stop and format chats with it: the tokenizer in its forms, the
// special tokens, the generation config (its EOS set) and the chat
// template. A format whose model file holds none of this (a Core ML
// package, a TensorRT engine) ships them beside it.
var TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
	"vocab.json", "merges.txt", "added_tokens.json", "generation_config.json", "config.json", "chat_template.jinja"}

// CopyTokenizerFiles copies those of TokenizerFiles the checkpoint folder
// from holds into to, and returns their names. Copies, not links: the
// output is a cache entry of its own.
func CopyTokenizerFiles(from, to string) ([]string, error) {
	var copied []string
	for _, name := range TokenizerFiles {
		src := filepath.Join(from, name)
		st, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return copied, err
		}
		if !st.Mode().IsRegular() {
			return copied, fmt.Errorf("%s is not a regular file", src)
		}
		if _, _, err := atomicfile.Copy(filepath.Join(to, name), src, 0o644); err != nil {
			return copied, fmt.Errorf("copy %s beside the model: %w", name, err)
		}
		copied = append(copied, name)
	}
	return copied, nil
}
