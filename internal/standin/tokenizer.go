package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// TokenizerFiles are the files a checkpoint's tokenizer is made of, as
// contract.py lists them: tokenizer_config.json alone configures a
// tokenizer but is none.
var TokenizerFiles = []string{"tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt", "tekken.json"}

// Tokenizer is what the stand-ins read of a folder's tokenizer where the
// real tools load it: the bytes of its files (a stand-in compares them
// where the real contract tokenizes a corpus), its special tokens and its
// chat templates.
type Tokenizer struct {
	// Digest is the sha256 over the tokenizer files' names and bytes; ""
	// when the folder ships none.
	Digest string
	// EOS and BOS are the ids of tokenizer_config.json's eos_token and
	// bos_token, looked up in tokenizer.json's added_tokens; nil when the
	// folder names none (or none the stand-in can find).
	EOS, BOS         *int
	EOSText, BOSText string
	// AddBOS is tokenizer_config.json's add_bos_token: whether encoding
	// puts the BOS first.
	AddBOS bool
	// Templates are the chat templates by name ("default" for the one),
	// from chat_template.jinja or tokenizer_config.json; Where says which.
	Templates map[string]string
	Where     string
}

// ReadTokenizer reads dir's tokenizer files the way contract.py and
// transformers do; a folder without them is a Tokenizer with no Digest.
func ReadTokenizer(dir string) (Tokenizer, error) {
	var t Tokenizer
	h, found := sha256.New(), false
	for _, f := range TokenizerFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return t, err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
		found = true
	}
	if found {
		t.Digest = hex.EncodeToString(h.Sum(nil))
	}
	var cfg struct {
		EOS          any  `json:"eos_token"`
		BOS          any  `json:"bos_token"`
		AddBOS       bool `json:"add_bos_token"`
		ChatTemplate any  `json:"chat_template"`
	}
	if err := readJSON(filepath.Join(dir, "tokenizer_config.json"), &cfg); err != nil {
		return t, err
	}
	var tj struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if t.Digest != "" {
		// A stand-in's tokenizer.json may be any JSON: only its added
		// tokens are read, when it has them.
		_ = readJSON(filepath.Join(dir, "tokenizer.json"), &tj)
	}
	lookup := func(v any) (string, *int) {
		text, _ := v.(string)
		if m, ok := v.(map[string]any); ok {
			text, _ = m["content"].(string)
		}
		for _, a := range tj.Added {
			if text != "" && a.Content == text {
				id := a.ID
				return text, &id
			}
		}
		return text, nil
	}
	t.EOSText, t.EOS = lookup(cfg.EOS)
	t.BOSText, t.BOS = lookup(cfg.BOS)
	t.AddBOS = cfg.AddBOS
	t.Templates = map[string]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		t.Templates["default"], t.Where = string(b), "chat_template.jinja"
		return t, nil
	}
	switch ct := cfg.ChatTemplate.(type) {
	case string:
		t.Templates["default"], t.Where = ct, "tokenizer_config.json chat_template"
	case []any:
		for _, e := range ct {
			if m, ok := e.(map[string]any); ok {
				name, _ := m["name"].(string)
				tmpl, _ := m["template"].(string)
				t.Templates[name] = tmpl
			}
		}
		t.Where = "tokenizer_config.json chat_template (named)"
	}
	return t, nil
}

// IDs reads an eos_token_id-like value of a JSON file (an id, a list of
// ids, or absent) in dir.
func IDs(dir, file, key string) ([]int, error) {
	var m map[string]any
	if err := readJSON(filepath.Join(dir, file), &m); err != nil {
		return nil, err
	}
	return IDList(m[key]), nil
}

// IDList is an id, or a list of ids, decoded from JSON, as a list.
func IDList(v any) []int {
	switch x := v.(type) {
	case float64:
		return []int{int(x)}
	case []any:
		var out []int
		for _, e := range x {
			if f, ok := e.(float64); ok {
				out = append(out, int(f))
			}
		}
		return out
	}
	return nil
}

// GGUFTokenizerKeys is what the stand-in convert_hf_to_gguf.py writes of
// a checkpoint's tokenizer into its GGUF, as the real one writes its
// tokenizer.* keys (gguf-py's SpecialVocab: the tokenizer's eos and bos
// tokens, else config.json's ids; add_bos_token; the chat template), with
// the tokenizer files' digest standing in for the vocabulary. nil when
// the checkpoint ships no tokenizer.
func GGUFTokenizerKeys(dir string) (map[string]any, error) {
	t, err := ReadTokenizer(dir)
	if err != nil || t.Digest == "" {
		return nil, err
	}
	keys := map[string]any{"tokenizer.ggml.model": "stand-in", "tokenizer.stand_in.sha256": t.Digest}
	for _, s := range []struct {
		key  string
		tok  *int
		conf string
	}{{"tokenizer.ggml.eos_token_id", t.EOS, "eos_token_id"}, {"tokenizer.ggml.bos_token_id", t.BOS, "bos_token_id"}} {
		if s.tok != nil {
			keys[s.key] = *s.tok
			continue
		}
		ids, err := IDs(dir, "config.json", s.conf)
		if err != nil {
			return nil, err
		}
		if len(ids) == 1 {
			keys[s.key] = ids[0]
		}
	}
	if t.AddBOS {
		keys["tokenizer.ggml.add_bos_token"] = true
	}
	names := make([]string, 0, len(t.Templates))
	for name := range t.Templates {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "default" {
			keys["tokenizer.chat_template"] = t.Templates[name]
		} else {
			keys["tokenizer.chat_template."+name] = t.Templates[name]
		}
	}
	return keys, nil
}

// readJSON decodes a JSON file into v; a missing file leaves v as it is.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
