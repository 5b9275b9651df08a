package edge

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// Request is one target to predict: a device, a format, the context and KV
// cache it will run with, and its budgets (0: unset).
type Request struct {
	Device  string `json:"device"`
	Format  string `json:"format"`
	Context int    `json:"context,omitempty"`  // 0: DefaultContext
	KVDtype string `json:"kv_dtype,omitempty"` // f16 (default), q8, q4, fp8

	MinTokensPerS   float64 `json:"min_tokens_per_s,omitempty"`
	MaxMemoryGB     float64 `json:"max_memory_gb,omitempty"`
	MaxFirstTokenMS float64 `json:"max_first_token_ms,omitempty"`
}

// Budget names, as recipes spell them.
const (
	BudgetMinTokensPerS   = "min_tokens_per_s"
	BudgetMaxMemoryGB     = "max_memory_gb"
	BudgetMaxFirstTokenMS = "max_first_token_ms"
)

// Budget is one of a target's budgets and what plan time predicts for it.
type Budget struct {
	Name  string  `json:"name"`
	Limit float64 `json:"limit"`
	// Predicted is nil when plan time cannot predict it; Basis says why.
	Predicted *float64 `json:"predicted,omitempty"`
	Basis     string   `json:"basis"`
}

// Problem is a target that cannot work as written: what is wrong, and the
// fixes with their numbers.
type Problem struct {
	Msg  string `json:"message"`
	Hint string `json:"hint,omitempty"`
}

// Prediction is everything plan time can say about one target.
type Prediction struct {
	Device  string `json:"device"`
	Format  string `json:"format"`
	Context int    `json:"context"`
	// ContextAssumed: the target set no context, so DefaultContext was used.
	ContextAssumed bool   `json:"context_assumed,omitempty"`
	KVDtype        string `json:"kv_dtype"`
	Model          Model  `json:"model"`
	// WeightsGB is params x the format's bits a weight; 0 when unknown.
	WeightsGB float64      `json:"weights_gb,omitempty"`
	Memory    *MemoryCheck `json:"memory,omitempty"`
	Speed     *Speed       `json:"speed,omitempty"`
	Budgets   []Budget     `json:"budgets,omitempty"`
	// Problems make the target impossible as written: plan refuses it.
	Problems []Problem `json:"problems,omitempty"`
	// Warnings are likely, not certain, failures (a budget the field
	// observations say will be missed).
	Warnings []string `json:"warnings,omitempty"`
	// Notes say what was assumed or could not be checked.
	Notes []string `json:"notes,omitempty"`
}

func (p *Prediction) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}

// Predict checks one target against its device: the memory pre-flight, the
// decode ceiling and the budgets.
func Predict(m Model, r Request) Prediction {
	p := Prediction{Device: r.Device, Format: r.Format, Context: r.Context, KVDtype: r.KVDtype, Model: m}
	if p.KVDtype == "" {
		p.KVDtype = DefaultKVDtype
	}
	if p.Context <= 0 {
		p.Context, p.ContextAssumed = DefaultContext, true
		p.note("the target sets no context: the KV cache is sized for %d tokens (the platform guide keeps edge context at 4K-8K); set context: to check the length the app will use", DefaultContext)
	}
	p.Notes = append(p.Notes, m.Notes...)
	d, ok := catalog.Lookup(r.Device)
	f, err := catalog.ParseFormat(r.Format)
	if !ok || err != nil {
		// Validation reports unknown devices and formats with their fixes.
		p.note("device %q or format %q is unknown, so nothing was predicted", r.Device, r.Format)
		return p
	}
	if m.HasParams() {
		p.WeightsGB = catalog.EstimateWeightsGB(m.Shape.Params, f)
		s := DecodeSpeed(d, p.WeightsGB)
		p.Speed = &s
	}
	if m.HasParams() && m.HasKVShape() {
		mc, err := CheckMemory(d, m.Shape, f, p.Context, p.KVDtype, r.MaxMemoryGB)
		if err != nil {
			p.note("memory pre-flight: %v", err)
		} else {
			p.Memory = &mc
			if !mc.OK() {
				p.Problems = append(p.Problems, memoryProblem(d, f, p, mc))
			}
		}
	}
	p.checkBudgets(d, f, r)
	return p
}

func memoryProblem(d catalog.Device, f catalog.Format, p Prediction, mc MemoryCheck) Problem {
	ctx := fmt.Sprintf("%d tokens", mc.Context)
	if p.ContextAssumed {
		ctx += " (the default; the target sets no context)"
	}
	parts := fmt.Sprintf("weights %s (%s parameters in %s at %g bits) + KV cache %s (%s, %s) + runtime overhead %s",
		gb(mc.WeightsGB), Params(mc.Params), f.Name, f.BitsPerWeight, gb(mc.KVGB), ctx, mc.KVDtype, gb(mc.OverheadGB))
	need, limit := gbApart(mc.NeedGB, mc.LimitGB)
	var msg string
	if mc.LimitIsBudget {
		msg = fmt.Sprintf("needs %s of memory on %s, over its max_memory_gb of %g: %s",
			need, d.ID, mc.LimitGB, parts)
	} else {
		msg = fmt.Sprintf("does not fit in memory on %s: it needs %s, and the device leaves %s to apps (%g GB less %g GB for the OS): %s",
			d.ID, need, limit, d.MemoryGB, d.OSReservedGB, parts)
	}
	return Problem{Msg: msg, Hint: fixesHint(mc.Fixes, "no shorter context or quantized KV cache fits: use a device with more memory")}
}

func fixesHint(fixes []Fix, none string) string {
	if len(fixes) == 0 {
		return none
	}
	parts := make([]string, len(fixes))
	for i, f := range fixes {
		parts[i] = f.String()
	}
	return "fixes: " + strings.Join(parts, "; or ")
}

func (p *Prediction) checkBudgets(d catalog.Device, f catalog.Format, r Request) {
	if r.MinTokensPerS > 0 {
		b := Budget{Name: BudgetMinTokensPerS, Limit: r.MinTokensPerS}
		switch s := p.Speed; {
		case s == nil || s.CeilingTokS <= 0:
			b.Basis = "not predicted: the model's size is unknown at plan time"
		case s.CeilingTokS < r.MinTokensPerS:
			b.Predicted, b.Basis = ptr(s.CeilingTokS), "decode ceiling: memory bandwidth / weights"
			p.Problems = append(p.Problems, Problem{
				Msg: fmt.Sprintf("min_tokens_per_s %g is out of reach on %s: decoding reads every weight once a token, so %g GB/s over %s of weights caps it at %s",
					r.MinTokensPerS, d.ID, d.MemoryBandwidthGBs, gb(s.ModelGB), tokS(s.CeilingTokS)),
				Hint: fixesHint(speedFixes(d, p.Model.Shape.Params, f, r.MinTokensPerS, 1), "use a device with more memory bandwidth"),
			})
		case s.ExpectedTokS > 0:
			b.Predicted, b.Basis = ptr(s.ExpectedTokS), "decode ceiling x the share of it observed on the device"
			if s.ExpectedTokS < r.MinTokensPerS {
				p.Warnings = append(p.Warnings, fmt.Sprintf(
					"min_tokens_per_s %g will likely be missed on %s: the ceiling is %s, but %s, which puts this model at about %s; %s",
					r.MinTokensPerS, d.ID, tokS(s.CeilingTokS), s.Observation, tokS(s.ExpectedTokS),
					fixesHint(speedFixes(d, p.Model.Shape.Params, f, r.MinTokensPerS, s.ObservedShare), "")))
			}
		default:
			b.Predicted, b.Basis = ptr(s.CeilingTokS), "decode ceiling (an upper bound: the catalog has no observation on this device)"
		}
		p.Budgets = append(p.Budgets, b)
	}
	if r.MaxMemoryGB > 0 {
		b := Budget{Name: BudgetMaxMemoryGB, Limit: r.MaxMemoryGB}
		if p.Memory != nil {
			b.Predicted, b.Basis = ptr(p.Memory.NeedGB), "memory pre-flight: weights + KV cache + runtime overhead"
		} else {
			b.Basis = "not predicted: the model's shape is unknown at plan time"
		}
		p.Budgets = append(p.Budgets, b)
	}
	if r.MaxFirstTokenMS > 0 {
		p.Budgets = append(p.Budgets, Budget{Name: BudgetMaxFirstTokenMS, Limit: r.MaxFirstTokenMS,
			Basis: "not predicted: time to first token is prompt processing, which depends on the prompt's length and the device's compute, neither known at plan time; a bench step measures it"})
	}
}

func ptr(x float64) *float64 { return &x }
