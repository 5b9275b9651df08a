package edge

import (
	"strings"
	"testing"
)

func llama3Model() Model {
	return Model{Source: "./llama3", Shape: llama3Shape, From: "test"}
}

func TestPredictDefaultsAndNotes(t *testing.T) {
	p := Predict(llama3Model(), Request{Device: "apple-a18", Format: "gguf-q4_0"})
	if p.Context != DefaultContext || !p.ContextAssumed || p.KVDtype != "f16" || len(p.Problems) != 0 {
		t.Fatalf("%+v", p)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "sets no context: the KV cache is sized for 4096 tokens") {
		t.Errorf("notes %q", p.Notes)
	}
	if p.Memory == nil || !p.Memory.OK() || p.Speed == nil || !near(p.WeightsGB, 4.66) {
		t.Errorf("memory %+v speed %+v", p.Memory, p.Speed)
	}
}

func TestPredictTrapIsAProblem(t *testing.T) {
	p := Predict(llama3Model(), Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 32768})
	if len(p.Problems) != 1 {
		t.Fatalf("problems %+v", p.Problems)
	}
	msg, hint := p.Problems[0].Msg, p.Problems[0].Hint
	for _, want := range []string{"does not fit in memory on apple-a18", "needs 9.49 GB", "leaves 6.00 GB to apps (8 GB less 2 GB for the OS)",
		"weights 4.66 GB (8.03B parameters in gguf-q4_0 at 4.64 bits)", "KV cache 4.29 GB (32768 tokens, f16)", "runtime overhead 0.53 GB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !strings.HasPrefix(hint, "fixes: context: 4096 (") || !strings.Contains(hint, "; or kv_dtype: q4 with context: 16384") ||
		!strings.Contains(hint, "; or a smaller model (at most 2.30B parameters") {
		t.Errorf("hint %q", hint)
	}
}

func TestPredictBudgets(t *testing.T) {
	m := llama3Model()
	// Over the ceiling (12.9 tok/s): impossible, so a problem.
	p := Predict(m, Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 4096, MinTokensPerS: 20})
	if len(p.Problems) != 1 || !strings.Contains(p.Problems[0].Msg, "min_tokens_per_s 20 is out of reach on apple-a18") ||
		!strings.Contains(p.Problems[0].Msg, "caps it at 12.9 tok/s") || !strings.Contains(p.Problems[0].Hint, "a smaller model (at most 5.17B parameters") {
		t.Errorf("20 tok/s: %+v", p.Problems)
	}
	// Under the ceiling but over what the device was seen to do: a warning.
	p = Predict(m, Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 4096, MinTokensPerS: 10})
	if len(p.Problems) != 0 || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "will likely be missed") ||
		!strings.Contains(p.Warnings[0], "about 8.1 tok/s") {
		t.Errorf("10 tok/s: problems %+v warnings %q", p.Problems, p.Warnings)
	}
	b := p.Budgets[0]
	if b.Name != BudgetMinTokensPerS || b.Limit != 10 || b.Predicted == nil || !near(*b.Predicted, 8.07) {
		t.Errorf("budget %+v", b)
	}
	// Within reach.
	p = Predict(m, Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 4096, MinTokensPerS: 5, MaxMemoryGB: 7, MaxFirstTokenMS: 500})
	if len(p.Problems)+len(p.Warnings) != 0 || len(p.Budgets) != 3 {
		t.Fatalf("5 tok/s: %+v", p)
	}
	if mem := p.Budgets[1]; mem.Name != BudgetMaxMemoryGB || mem.Predicted == nil || !near(*mem.Predicted, 5.73) {
		t.Errorf("memory budget %+v", mem)
	}
	if ttft := p.Budgets[2]; ttft.Name != BudgetMaxFirstTokenMS || ttft.Predicted != nil || !strings.HasPrefix(ttft.Basis, "not predicted") {
		t.Errorf("first-token budget %+v", ttft)
	}
	// No observation on the device: the ceiling is the prediction, and says so.
	p = Predict(m, Request{Device: "jetson-thor", Format: "nvfp4", Context: 4096, KVDtype: "fp8", MinTokensPerS: 30})
	if b := p.Budgets[0]; b.Predicted == nil || !near(*b.Predicted, 60.44) || !strings.Contains(b.Basis, "upper bound") {
		t.Errorf("thor: %+v", b)
	}
	// Over max_memory_gb: a problem naming the budget.
	p = Predict(m, Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 4096, MaxMemoryGB: 4})
	if len(p.Problems) != 1 || !strings.Contains(p.Problems[0].Msg, "over its max_memory_gb of 4") {
		t.Errorf("4 GB budget: %+v", p.Problems)
	}
}

func TestPredictUnknownShapeChecksNothing(t *testing.T) {
	m := Model{Source: "https://example.com/m.tgz", Notes: []string{"downloaded at run time"}}
	p := Predict(m, Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 4096, MinTokensPerS: 1000, MaxMemoryGB: 0.1})
	if len(p.Problems) != 0 || p.Memory != nil || p.Speed != nil {
		t.Fatalf("%+v", p)
	}
	for _, b := range p.Budgets {
		if b.Predicted != nil || !strings.HasPrefix(b.Basis, "not predicted") {
			t.Errorf("budget %+v", b)
		}
	}
	if len(p.Notes) != 1 || p.Notes[0] != "downloaded at run time" {
		t.Errorf("notes %q", p.Notes)
	}
}

func TestManifestRecords(t *testing.T) {
	p := Predict(llama3Model(), Request{Device: "apple-a18", Format: "gguf-q4_0", Context: 4096, MinTokensPerS: 5, MaxFirstTokenMS: 500})
	mf := p.ManifestMemoryFit()
	if mf == nil || mf.Device != "apple-a18" || mf.Context != 4096 || mf.KVDtype != "f16" || !mf.Fits ||
		mf.KVCacheBytes != 1<<29 || mf.AvailableBytes != 6e9 {
		t.Fatalf("%+v", mf)
	}
	if sum := mf.WeightsBytes + mf.KVCacheBytes + mf.OverheadBytes; sum-mf.TotalBytes > 2 || mf.TotalBytes-sum > 2 {
		t.Errorf("total %d, parts sum to %d", mf.TotalBytes, sum)
	}
	b := p.ManifestBudgets()
	if b == nil || b.MinTokensPerS == nil || b.MinTokensPerS.Limit != 5 || b.MinTokensPerS.Predicted == nil ||
		b.MaxMemoryGB != nil || b.MaxFirstTokenMS == nil || b.MaxFirstTokenMS.Predicted != nil || b.MaxFirstTokenMS.Actual != nil {
		t.Errorf("budgets %+v", b)
	}
	if Predict(Model{}, Request{Device: "apple-a18", Format: "gguf-q4_0"}).ManifestMemoryFit() != nil {
		t.Error("a memory fit without a shape")
	}
	if (Prediction{}).ManifestBudgets() != nil {
		t.Error("budgets without budgets")
	}
}
