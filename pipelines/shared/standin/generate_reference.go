package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
)

func init() { standin.Tools["generate_reference.py"] = generateReference }

// standInEOS is the end-of-sequence id of the stand-in's sequences.
const standInEOS = 2

// reference is the part of reference.json the decode stand-ins read, in
// the real file's layout (generate_reference.py).
type reference struct {
	Format        int                 `json:"format"`
	MaxNewTokens  int                 `json:"max_new_tokens"`
	ChatTemplate  bool                `json:"chat_template"`
	EOSIDs        []int               `json:"eos_ids"`
	SlidingWindow *int                `json:"sliding_window"`
	Sequences     []referenceSequence `json:"sequences"`
}

type referenceSequence struct {
	ID            string   `json:"id"`
	PromptIDs     []int    `json:"prompt_ids"`
	Tokens        []int    `json:"tokens"`
	StoppedAtEOS  bool     `json:"stopped_at_eos"`
	CrossesWindow *bool    `json:"crosses_window"`
	TopK          topKRows `json:"topk"`
}

type topKRows struct {
	IDs  [][]int     `json:"ids"`
	Logp [][]float64 `json:"logp"`
}

// prompts is data/chat-prompts.json as the real script reads it.
type prompts struct {
	Prompts []struct {
		ID       string `json:"id"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	} `json:"prompts"`
	Window struct {
		ID          string `json:"id"`
		Instruction string `json:"instruction"`
	} `json:"window"`
}

// generateReference: generate_reference.py --model DIR --prompts FILE --out
// DIR [--max-new-tokens N] [--text FILE]. Its "tokens" are words: a
// prompt's tokens are its words' hashes, and the original "generates" as
// many tokens as the prompt has words (each a hash of the checkpoint, the
// prompt and the step), stopping at EOS when that is under the cap, so
// the brief first prompt stops early as the real model does. A
// config.json with a sliding_window adds the window sequence, cut from
// --text, as the real script does.
func generateReference(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate_reference", flag.ContinueOnError)
	model := fs.String("model", "", "")
	promptsFile := fs.String("prompts", "", "")
	out := fs.String("out", "", "")
	maxNew := fs.Int("max-new-tokens", 64, "")
	text := fs.String("text", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *promptsFile == "" || *out == "" {
		return errors.New("usage: generate_reference.py --model DIR --prompts FILE --out DIR [--max-new-tokens N] [--text FILE]")
	}
	if *maxNew < 1 {
		return errors.New("--max-new-tokens must be at least 1")
	}
	ckpt, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(*promptsFile)
	if err != nil {
		return err
	}
	var ps prompts
	if err := json.Unmarshal(b, &ps); err != nil || len(ps.Prompts) == 0 {
		return fmt.Errorf("%s holds no chat prompts (%v)", *promptsFile, err)
	}
	window, err := configWindow(*model)
	if err != nil {
		return err
	}
	ref := reference{Format: 1, MaxNewTokens: *maxNew, EOSIDs: []int{standInEOS}, SlidingWindow: window, ChatTemplate: hasChatTemplate(*model)}
	for _, p := range ps.Prompts {
		var words []string
		for _, m := range p.Messages {
			words = append(words, strings.Fields(m.Content)...)
		}
		ref.Sequences = append(ref.Sequences, standInSequence(ckpt, p.ID, words, len(words), *maxNew, nil))
	}
	if window != nil {
		if *text == "" {
			return fmt.Errorf("the model has a %d-token sliding window: pass --text, the passage its extra sequence is cut from", *window)
		}
		tb, err := os.ReadFile(*text)
		if err != nil {
			return err
		}
		passage := strings.Fields(string(tb))
		if len(passage) == 0 {
			return errors.New("--text is empty: a sliding-window model needs a passage to fill its window")
		}
		words := strings.Fields(ps.Window.Instruction)
		for len(words) < *window-2 {
			words = append(words, passage[len(words)%len(passage)])
		}
		ref.Sequences = append(ref.Sequences, standInSequence(ckpt, ps.Window.ID, words, *maxNew, *maxNew, window))
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	rb, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "reference.json"), rb, 0o644); err != nil {
		return err
	}
	rep := report.GenerateReference{Reference: "reference.json", Sequences: len(ref.Sequences), MaxNewTokens: *maxNew, ChatTemplate: ref.ChatTemplate,
		EOSIDs: ref.EOSIDs, SlidingWindow: window, Cache: "stand-in", Transformers: "stand-in", Torch: "stand-in"}
	for _, s := range ref.Sequences {
		rep.GeneratedTokens += len(s.Tokens)
		if s.StoppedAtEOS {
			rep.StoppedAtEOS++
		}
		if s.CrossesWindow != nil {
			c := *s.CrossesWindow || (rep.CrossesWindow != nil && *rep.CrossesWindow)
			rep.CrossesWindow = &c
		}
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// hasChatTemplate is whether the checkpoint's tokenizer has a chat
// template, where transformers finds one: chat_template.jinja, or
// tokenizer_config.json's chat_template.
func hasChatTemplate(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "chat_template.jinja")); err == nil {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return false
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	return json.Unmarshal(b, &cfg) == nil && len(cfg.ChatTemplate) > 0 && string(cfg.ChatTemplate) != "null"
}

// configWindow is the checkpoint's sliding window, as the real script
// reads config.json: sliding_window, unless layer_types names no sliding
// layer.
func configWindow(dir string) (*int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	var cfg struct {
		SlidingWindow *int     `json:"sliding_window"`
		LayerTypes    []string `json:"layer_types"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	if cfg.SlidingWindow == nil || *cfg.SlidingWindow <= 0 {
		return nil, nil
	}
	if cfg.LayerTypes != nil {
		for _, t := range cfg.LayerTypes {
			if strings.Contains(t, "sliding") {
				return cfg.SlidingWindow, nil
			}
		}
		return nil, nil
	}
	return cfg.SlidingWindow, nil
}

// standInSequence is one sequence: the prompt's word hashes, then n
// generated tokens derived from the checkpoint and the prompt (EOS last
// when n is under the cap), with a top-4 at every step whose first token
// is the generated one.
func standInSequence(ckpt, id string, words []string, n, maxNew int, window *int) referenceSequence {
	s := referenceSequence{ID: id, TopK: topKRows{IDs: [][]int{}, Logp: [][]float64{}}}
	for _, w := range words {
		s.PromptIDs = append(s.PromptIDs, 3+int(hashOf(w)%30000))
	}
	n = max(1, n)
	if n >= maxNew {
		n = maxNew
	} else {
		s.StoppedAtEOS = true
	}
	for i := 0; i < n; i++ {
		tok := 3 + int(hashOf(fmt.Sprintf("%s/%s/%d", ckpt, id, i))%30000)
		if s.StoppedAtEOS && i == n-1 {
			tok = standInEOS
		}
		s.Tokens = append(s.Tokens, tok)
		s.TopK.IDs = append(s.TopK.IDs, []int{tok, tok + 1, tok + 2, tok + 3})
		s.TopK.Logp = append(s.TopK.Logp, []float64{-0.2, -2.1, -3.0, -3.4})
	}
	if window != nil {
		c := len(s.PromptIDs) <= *window && *window <= len(s.PromptIDs)+len(s.Tokens)-2
		s.CrossesWindow = &c
	}
	return s
}

func hashOf(s string) uint64 {
	h := sha256.Sum256([]byte(s))
	return binary.LittleEndian.Uint64(h[:8])
}
