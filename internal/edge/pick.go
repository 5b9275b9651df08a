package edge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// PickRequest is what `edgepipe pick` is asked: a platform, a model and the
// budgets (0: none).
type PickRequest struct {
	Platform      string  `json:"platform"`
	Model         Model   `json:"model"`
	Context       int     `json:"context,omitempty"` // 0: DefaultContext
	MaxMemoryGB   float64 `json:"max_memory_gb,omitempty"`
	MinTokensPerS float64 `json:"min_tokens_per_s,omitempty"`
	// Format, when set, overrides the platform's formats (a format this
	// build has a pipeline for, say); the platform's devices that run it
	// are still checked in order.
	Format string `json:"format,omitempty"`
	// Refuses says why a format cannot take the model's architecture ("":
	// it can); nil takes every one. The formats' families know.
	Refuses func(format string) string `json:"-"`
}

// Candidate is one device and format the picker checked.
type Candidate struct {
	Device     string     `json:"device"`
	Format     string     `json:"format"`
	Meets      bool       `json:"meets"`
	Prediction Prediction `json:"prediction"`
}

// Pick is the picker's answer.
type Pick struct {
	Platform   string   `json:"platform"`
	Summary    string   `json:"summary"`
	Device     string   `json:"device"`
	DeviceName string   `json:"device_name"`
	Format     string   `json:"format"`
	KVDtype    string   `json:"kv_dtype"`
	Context    int      `json:"context"`
	Conversion string   `json:"conversion"`
	Reasons    []string `json:"reasons"`
	// Prediction is the chosen target's pre-flight, speed and budgets.
	Prediction Prediction `json:"prediction"`
	// Considered is every candidate checked, in the order checked.
	Considered []Candidate `json:"considered"`
	// Warnings say what does not meet the budgets, with the fixes.
	Warnings []string `json:"warnings,omitempty"`

	MinTokensPerS float64 `json:"min_tokens_per_s,omitempty"`
	MaxMemoryGB   float64 `json:"max_memory_gb,omitempty"`
}

// UnknownPlatformError names the platforms there are.
type UnknownPlatformError struct{ Platform string }

func (e *UnknownPlatformError) Error() string {
	return fmt.Sprintf("unknown platform %q: use one of %s", e.Platform, strings.Join(Platforms(), ", "))
}

// ModelError is a model no run can use (Model.Problems).
type ModelError struct {
	Source   string
	Problems []string
}

func (e *ModelError) Error() string {
	return fmt.Sprintf("model %s cannot be used: %s", e.Source, strings.Join(e.Problems, "; "))
}

// PickTarget chooses the device, format and KV cache for a platform by the
// domain brief's rules, checking each candidate with the same pre-flight
// and ceiling math plan uses: the first candidate that fits and meets the
// budgets wins. When none does, the platform's first choice stands, with
// warnings that say why and what would fix it.
func PickTarget(req PickRequest) (Pick, error) {
	rule, ok := ruleFor(req.Platform)
	if !ok {
		return Pick{}, &UnknownPlatformError{Platform: req.Platform}
	}
	if len(req.Model.Problems) > 0 {
		return Pick{}, &ModelError{Source: req.Model.Source, Problems: req.Model.Problems}
	}
	if req.Model.Missing {
		return Pick{}, &ModelError{Source: req.Model.Source, Problems: []string{
			"there is no such file or folder (a relative path is from the current folder): point --model at a model folder (config.json and safetensors), a .gguf file, builtin:NAME or hf://org/name"}}
	}
	// A recipe whose context is beyond the model's max_position_embeddings
	// fails validate, so the default yields to the model and an explicit
	// context beyond it is refused here rather than written.
	maxCtx := req.Model.MaxContext
	var clamped bool
	switch {
	case req.Context <= 0 && maxCtx > 0 && maxCtx < DefaultContext:
		req.Context, clamped = maxCtx, true
	case req.Context <= 0:
		req.Context = DefaultContext
	case maxCtx > 0 && req.Context > maxCtx:
		return Pick{}, &ContextError{Source: req.Model.Source, Context: req.Context, Max: maxCtx}
	}
	formats := rule.Formats
	if req.Format != "" {
		if err := rule.overrideFormat(req.Format); err != nil {
			return Pick{}, err
		}
		formats = []string{req.Format}
	}
	cands, skipped, refused := candidates(rule, formats, req)
	fellBack := false
	if len(cands) == 0 && len(refused) > 0 && req.Format == "" {
		// The platform's own formats cannot take the architecture: the
		// formats that take most, on the same devices' CPUs.
		if fb, fbSkipped, _ := candidates(rule, archFallbackFormats, req); len(fb) > 0 {
			cands, skipped, fellBack = fb, fbSkipped, true
		}
	}
	if len(cands) == 0 && len(refused) > 0 {
		return Pick{}, &ArchitectureError{Source: req.Model.Source, Architecture: req.Model.Architecture, Platform: rule.Name, Refused: refused}
	}
	if len(cands) == 0 {
		return Pick{}, fmt.Errorf("no %s device runs %s", rule.Name, strings.Join(formats, " or "))
	}
	chosen := 0
	for i, c := range cands {
		if c.Meets {
			chosen = i
			break
		}
	}
	c := cands[chosen]
	d, _ := catalog.Lookup(c.Device)
	p := Pick{
		Platform: rule.Name, Summary: rule.Summary, Device: c.Device, DeviceName: d.Name,
		Format: c.Format, KVDtype: rule.KVDtype, Context: c.Prediction.Context,
		Conversion: conversions[c.Format], Reasons: append([]string(nil), rule.Reasons...),
		Prediction: c.Prediction, Considered: cands,
		MinTokensPerS: req.MinTokensPerS, MaxMemoryGB: req.MaxMemoryGB,
	}
	if fellBack {
		// The guide's reasons are for the formats it could not be.
		p.Reasons = []string{fmt.Sprintf("%s on the CPU instead of the platform guide's %s, which cannot take this architecture: %s",
			c.Format, strings.Join(formats, " or "), strings.Join(refused, "; "))}
	}
	if clamped {
		p.Reasons = append(p.Reasons, fmt.Sprintf("context %d, the model's max_position_embeddings: the default %d is beyond what it was trained for", maxCtx, DefaultContext))
	}
	if req.Format != "" && req.Format != rule.Formats[0] {
		p.Reasons = append(p.Reasons, fmt.Sprintf("format %s as asked (--format); the platform guide's choice for %s is %s", req.Format, rule.Name, rule.Formats[0]))
	}
	p.Reasons = append(p.Reasons, skipped[c.Device]...)
	for _, earlier := range cands[:chosen] {
		p.Reasons = append(p.Reasons, fmt.Sprintf("not %s on %s: %s", earlier.Format, earlier.Device, firstFailure(earlier.Prediction)))
	}
	if !c.Meets {
		for _, prob := range c.Prediction.Problems {
			p.Warnings = append(p.Warnings, prob.Msg+"; "+prob.Hint)
		}
		p.Warnings = append(p.Warnings, c.Prediction.Warnings...)
		if len(cands) > 1 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("the other candidates for %s miss them too (%s)", rule.Name, candidateList(cands[1:])))
		}
	}
	return p, nil
}

// archFallbackFormats are what pick offers, in order, when none of a
// platform's formats takes the model's architecture: llama.cpp and ONNX
// Runtime run on the CPU of every device of the catalog but the browsers,
// and their converters take the most architectures.
var archFallbackFormats = []string{"gguf-q4_k_m", "onnx-int4"}

// candidates are the devices and formats the picker checks, in the
// platform's order, with what it skipped on each device and why, and the
// formats refused for the model's architecture.
func candidates(rule platformRule, formats []string, req PickRequest) (cands []Candidate, skipped map[string][]string, refused []string) {
	skipped = map[string][]string{}
	for _, dev := range rule.Devices {
		for _, f := range formats {
			if ok, _ := catalog.CanRun(dev, f); !ok {
				continue
			}
			if req.Refuses != nil {
				if why := req.Refuses(f); why != "" {
					msg := fmt.Sprintf("not %s: it cannot take a %s model: %s", f, req.Model.Architecture, why)
					skipped[dev] = append(skipped[dev], msg)
					if !slices.Contains(refused, msg) {
						refused = append(refused, msg)
					}
					continue
				}
			}
			if why := lacksFeature(dev, f); why != "" && req.Format == "" {
				skipped[dev] = append(skipped[dev], why)
				continue
			}
			pred := Predict(req.Model, Request{Device: dev, Format: f, Context: req.Context, KVDtype: rule.KVDtype,
				MinTokensPerS: req.MinTokensPerS, MaxMemoryGB: req.MaxMemoryGB})
			cands = append(cands, Candidate{Device: dev, Format: f, Prediction: pred,
				Meets: len(pred.Problems) == 0 && len(pred.Warnings) == 0})
		}
	}
	return cands, skipped, refused
}

func firstFailure(p Prediction) string {
	if len(p.Problems) > 0 {
		return p.Problems[0].Msg
	}
	if len(p.Warnings) > 0 {
		w := p.Warnings[0]
		if i := strings.Index(w, "; fixes:"); i > 0 {
			w = w[:i]
		}
		return w
	}
	return "it meets the budgets"
}

func candidateList(cands []Candidate) string {
	parts := make([]string, len(cands))
	for i, c := range cands {
		parts[i] = c.Format + " on " + c.Device
	}
	return strings.Join(parts, ", ")
}

// ArchitectureError: no format the platform's devices run takes the
// model's architecture.
type ArchitectureError struct {
	Source, Architecture, Platform string
	Refused                        []string
}

func (e *ArchitectureError) Error() string {
	return fmt.Sprintf("%s is a %s model, and no %s format takes it (%s): pick another platform, or a model of another architecture",
		e.Source, e.Architecture, e.Platform, strings.Join(e.Refused, "; "))
}

// ContextError is a context asked for beyond what the model supports.
type ContextError struct {
	Source       string
	Context, Max int
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("context %d is beyond what %s supports (max_position_embeddings %d): use --context %d or less, or leave it out to get the model's own", e.Context, e.Source, e.Max, e.Max)
}

// FormatError is a --format the platform's devices cannot run.
type FormatError struct{ Msg string }

func (e *FormatError) Error() string { return e.Msg }

func (r platformRule) overrideFormat(format string) error {
	if _, err := catalog.ParseFormat(format); err != nil {
		return &FormatError{Msg: err.Error()}
	}
	var fix string
	for _, dev := range r.Devices {
		ok, why := catalog.CanRun(dev, format)
		if ok {
			return nil
		}
		if fix == "" {
			fix = why
		}
	}
	return &FormatError{Msg: fmt.Sprintf("no %s device (%s) runs %s: %s", r.Name, strings.Join(r.Devices, ", "), format, fix)}
}

// lacksFeature says why a device's runtime cannot load a format it lists
// in general (WebLLM's q4f16_1 needs the browser's shader-f16), or "".
func lacksFeature(dev, format string) string {
	if format != "mlc-q4f16_1" {
		return ""
	}
	d, ok := catalog.Lookup(dev)
	if !ok || d.ShaderF16 == nil || *d.ShaderF16 {
		return ""
	}
	return fmt.Sprintf("not mlc-q4f16_1 on %s: its browsers cannot be counted on for shader-f16, which WebLLM needs for q4f16_1; mlc-q4f32_1 is what WebLLM serves without it (keep a server fallback, a GGUF behind the same OpenAI-compatible API, for browsers without WebGPU)", dev)
}
