package gguf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Measure times the prompt and the decode with llama-bench, in two
// runs of reps repetitions each, and returns every repetition's time:
//
//   - prompt: -p P -n 0, a P-token prompt from an empty KV cache;
//   - decode: -p 0 -n 1 -d P, one token generated with P tokens already
//     in the KV cache. llama-bench fills the cache once, restores it before
//     each repetition and starts the clock after the restore, so each
//     sample is exactly one decode step at depth P.
//
// llama-bench's own warm-up run (one prompt, one token) comes on top of
// the step's warm-up repetitions, which the caller drops.
// llamaBench is the llama.cpp bench backend.
type llamaBench struct{}

func (llamaBench) Name() string { return "llama.cpp" }
func (llamaBench) Tool() string { return toolchain.ToolBench }

func (llamaBench) Measure(ctx context.Context, sc *steps.Context, model string, prompt, reps, threads int) (promptNS, decodeNS []float64, err error) {
	common := []string{"-m", model, "-r", strconv.Itoa(reps), "-t", strconv.Itoa(threads), "-o", "jsonl"}
	if err := sc.RunTool(ctx, toolchain.ToolBench, append(append([]string{}, common...), "-p", strconv.Itoa(prompt), "-n", "0")...); err != nil {
		return nil, nil, err
	}
	if err := sc.RunTool(ctx, toolchain.ToolBench, append(append([]string{}, common...), "-p", "0", "-n", "1", "-d", strconv.Itoa(prompt))...); err != nil {
		return nil, nil, err
	}
	tests, err := readLlamaBenchTests(sc.LogPath)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tests {
		switch {
		case t.NPrompt == prompt && t.NGen == 0 && t.NDepth == 0:
			promptNS = t.SamplesNS
		case t.NPrompt == 0 && t.NGen == 1 && t.NDepth == prompt:
			decodeNS = t.SamplesNS
		}
	}
	if promptNS == nil || decodeNS == nil {
		return nil, nil, fmt.Errorf("llama-bench printed no result for the prompt (pp%d) or the decode (tg1 at depth %d) test (see %s)", prompt, prompt, sc.LogPath)
	}
	if len(promptNS) != reps || len(decodeNS) != reps {
		return nil, nil, fmt.Errorf("llama-bench printed %d prompt and %d decode timings, %d repetitions were asked for (see %s)", len(promptNS), len(decodeNS), reps, sc.LogPath)
	}
	return promptNS, decodeNS, nil
}

// llamaBenchTest is one line of `llama-bench -o jsonl`.
type llamaBenchTest struct {
	NPrompt   int       `json:"n_prompt"`
	NGen      int       `json:"n_gen"`
	NDepth    int       `json:"n_depth"`
	NThreads  int       `json:"n_threads"`
	SamplesNS []float64 `json:"samples_ns"`
}

// readLlamaBenchTests reads every llama-bench JSONL result in a log, in
// order; the log also holds llama.cpp's own messages.
func readLlamaBenchTests(logPath string) ([]llamaBenchTest, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []llamaBenchTest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) < 2 || line[0] != '{' || !bytes.Contains(line, []byte(`"samples_ns"`)) {
			continue
		}
		var t llamaBenchTest
		if err := json.Unmarshal(line, &t); err != nil {
			return nil, fmt.Errorf("a llama-bench result line does not parse: %w", err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", logPath, err)
	}
	return out, nil
}
