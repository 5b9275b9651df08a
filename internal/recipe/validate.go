package recipe

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/suggest"
)

// Catalog is what validation needs to know about devices and formats.
// internal/catalog.Catalog is the real one; tests use a small fake.
type Catalog interface {
	DeviceIDs() []string
	HasDevice(id string) bool
	FormatNames() []string
	ValidFormat(name string) bool
	// CanRun: when false, fix is a sentence naming what to use instead
	CanRun(deviceID, format string) (ok bool, fix string)
	// BenchBackend names the runtime that measures a format on this host
	// token by token, or false when nothing here can.
	BenchBackend(format string) (backend string, ok bool)
	// Options returns a new, empty value of the format's typed with:
	// options (a pointer to an options struct), or nil when it takes none.
	Options(format string) any
	// KVFix says why the device cannot hold the format's KV cache in kv,
	// with the fix, or "".
	KVFix(deviceID, format, kv string) string
	// CheckSource refuses a model.source that no run could fetch (an
	// unknown scheme, a malformed URL); its message must not quote the
	// source's credentials.
	CheckSource(src string) error
}

// TaskCatalog is a Catalog that also knows the formats of the tasks
// other than text generation, which may share a name with a text
// format (a vision onnx-fp32) and have options of their own.
type TaskCatalog interface {
	TaskFormats(task string) []string
	TaskOptions(task, format string) any
}

// TaskBenchCatalog is a TaskCatalog that also knows which runtime times
// a task's format on this host (an image classifier's onnx-int8 on ONNX
// Runtime, its tflite-int8 on the LiteRT interpreter).
type TaskBenchCatalog interface {
	TaskBench(task, format string) (runtime string, ok bool)
}

// Validate checks a parsed recipe against the device catalog and the known
// step kinds: devices and formats exist, each device can run its target's
// format, targets and steps do not share a name, every needs entry names a
// target or step, and every uses names a step kind. A nil kinds skips the
// last check. Fields the parser already reported as missing are skipped,
// so a partly parsed recipe yields only new problems.
//
// Needs naming generated steps (ids with ':', or the shared source step)
// are left to the plan, which knows the generated graph.
func Validate(r *Recipe, cat Catalog, kinds []string) Diagnostics {
	var diags Diagnostics
	add := func(pos Pos, hint, format string, args ...any) {
		diags = append(diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, clipArgs(args)...), Hint: hint})
	}

	// Targets and steps share one name space: needs: [x] must name one thing.
	targetAt := map[string]Pos{}
	var names []string
	for _, t := range r.Targets {
		if _, dup := targetAt[t.Name]; !dup {
			targetAt[t.Name] = t.Pos
			names = append(names, t.Name)
		}
	}
	stepAt := map[string]Pos{}
	for _, s := range r.Steps {
		if at, clash := targetAt[s.ID]; clash {
			add(s.Pos, "rename the step; targets and steps share one set of names so needs: can tell them apart",
				"step %q has the same name as the target on line %d", s.ID, at.Line)
			continue
		}
		if _, dup := stepAt[s.ID]; !dup {
			stepAt[s.ID] = s.Pos
			names = append(names, s.ID)
		}
	}

	if r.Model.Source != "" {
		if err := cat.CheckSource(r.Model.Source); err != nil {
			add(r.Model.SourcePos, "model.source takes hf://OWNER/REPO[@REVISION], builtin:NAME, https://..., s3::https://..., gcs::https://..., git::https://... or a local folder",
				"model.source: %v", err)
		}
	}

	diags = append(diags, validateTargets(r, cat)...)

	for _, s := range r.Steps {
		for i, n := range s.Needs {
			if strings.Contains(n, ":") || n == SourceStep {
				continue
			}
			if _, ok := targetAt[n]; ok {
				continue
			}
			if _, ok := stepAt[n]; ok {
				continue
			}
			pos := s.Pos
			if i < len(s.NeedsPos) {
				pos = s.NeedsPos[i]
			}
			hint := "needs names a target (under targets:) or a step (under steps:)"
			if c := suggest.Closest(n, names); c != "" {
				hint = fmt.Sprintf("did you mean %q?", c)
			}
			add(pos, hint, "step %q needs %q, which is neither a target nor a step", s.ID, n)
		}
		if s.Uses != "" && kinds != nil && !slices.Contains(kinds, s.Uses) {
			add(s.UsesPos, closestOrList(s.Uses, kinds, "step kinds"),
				"step %q uses %q, which is not a step kind", s.ID, s.Uses)
		}
	}
	diags.Sort()
	return diags
}

// validateTargets checks each target's device, format, bench and options.
func validateTargets(r *Recipe, cat Catalog) Diagnostics {
	var diags Diagnostics
	add := func(pos Pos, hint, format string, args ...any) {
		diags = append(diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, clipArgs(args)...), Hint: hint})
	}
	for i := range r.Targets {
		t := &r.Targets[i]
		deviceOK := t.Device != "" && cat.HasDevice(t.Device)
		if t.Device != "" && !deviceOK {
			hint := closestOrList(t.Device, cat.DeviceIDs(), "known devices")
			if strings.HasSuffix(hint, "?") {
				hint += " `edgepipe devices` lists them all"
			} else {
				hint += "; `edgepipe devices` lists them all"
			}
			add(t.DevicePos, hint,
				"target %q: unknown device %q", t.Name, t.Device)
		}
		formatOK := t.Format != "" && cat.ValidFormat(t.Format)
		tc, tasks := cat.(TaskCatalog)
		vision := r.Traits().Images && tasks
		if vision && t.Format != "" {
			formats := tc.TaskFormats(r.Task)
			if formatOK = slices.Contains(formats, t.Format); !formatOK {
				add(t.FormatPos, closestOrList(t.Format, formats, "image-classification formats"),
					"target %q: format %q is not an image-classification format", t.Name, t.Format)
			}
		} else if t.Format != "" && !formatOK {
			add(t.FormatPos, closestOrList(t.Format, cat.FormatNames(), "valid formats"),
				"target %q: unknown format %q", t.Name, t.Format)
		}
		if deviceOK && formatOK {
			if ok, fix := cat.CanRun(t.Device, t.Format); !ok {
				add(t.FormatPos, fix, "target %q: no runtime on %s loads %s", t.Name, t.Device, t.Format)
			} else if fix := cat.KVFix(t.Device, t.Format, t.KVDtype); fix != "" && !vision {
				pos := t.KVDtypePos
				if pos.Line == 0 {
					pos = t.FormatPos
				}
				add(pos, fix, "target %q: %s on %s cannot hold a %s KV cache", t.Name, t.Format, t.Device, t.KVDtype)
			}
		}
		if formatOK {
			d := validateBench(*t, cat)
			if vision {
				d = validateTaskBench(r, *t, cat)
			}
			if d != nil {
				diags = append(diags, *d)
			}
			opts := cat.Options(t.Format)
			if vision {
				opts = tc.TaskOptions(r.Task, t.Format)
			}
			diags = append(diags, DecodeTargetOptions(t, opts)...)
		}
	}
	return diags
}

// closestOrList suggests the closest spelling, or lists a few valid names.
func closestOrList(word string, valid []string, what string) string {
	if c := suggest.Closest(word, valid); c != "" {
		return fmt.Sprintf("did you mean %q?", c)
	}
	const show = 8
	if len(valid) > show {
		return what + " include " + strings.Join(valid[:show], ", ") + ", ..."
	}
	return what + ": " + strings.Join(valid, ", ")
}

// Load parses and validates the recipe at path, returning every parse and
// validation problem together as Diagnostics.
func Load(path string, cat Catalog, kinds []string) (*Recipe, error) {
	data, err := boundedfile.Read(path, boundedfile.RecipeLimit)
	if err != nil {
		return nil, fmt.Errorf("read recipe: %w", err)
	}
	return LoadBytes(path, data, cat, kinds)
}

// LoadBytes is Load for a recipe already read; path names it in positions.
func LoadBytes(path string, data []byte, cat Catalog, kinds []string) (*Recipe, error) {
	r, err := Parse(path, data)
	var diags Diagnostics
	if err != nil && !errors.As(err, &diags) {
		return nil, err
	}
	if r != nil {
		diags = append(diags, Validate(r, cat, kinds)...)
	}
	if len(diags) > 0 {
		diags.Sort()
		return nil, diags
	}
	return r, nil
}

// validateBench reports a bench section a target cannot honour.
func validateBench(t Target, cat Catalog) *Diagnostic {
	if t.Bench == nil {
		return nil
	}
	if _, ok := cat.BenchBackend(t.Format); !ok {
		return &Diagnostic{Pos: t.BenchPos,
			Msg:  fmt.Sprintf("target %q: bench cannot measure %s on this host", t.Name, t.Format),
			Hint: "bench runs GGUF targets through llama.cpp and onnx-fp32/onnx-int4 targets through ONNX Runtime; remove bench: from this target"}
	}
	if t.Context > 0 && t.Bench.PromptTokens >= t.Context {
		return &Diagnostic{Pos: t.BenchPos,
			Msg: fmt.Sprintf("target %q: bench.prompt_tokens %d does not leave room for a decoded token in its context of %d",
				t.Name, t.Bench.PromptTokens, t.Context),
			Hint: fmt.Sprintf("use a prompt_tokens under %d", t.Context)}
	}
	return nil
}

// validateTaskBench reports a bench on a format of an image-classification
// recipe that no runtime here can time (a bench: the recipe wrote for
// every target is reported where it was written).
func validateTaskBench(r *Recipe, t Target, cat Catalog) *Diagnostic {
	tb, ok := cat.(TaskBenchCatalog)
	if t.Bench == nil || !ok {
		return nil
	}
	// A bench: written at the top of the recipe times every target whose
	// format runs here; the others (Core ML, a TensorRT engine) are left
	// out of the timing, not refused: the recipe asked for "what you can".
	if _, ok := tb.TaskBench(r.Task, t.Format); ok || t.BenchPos == r.BenchPos {
		return nil
	}
	return &Diagnostic{Pos: t.BenchPos,
		Msg:  fmt.Sprintf("target %q: bench cannot run %s on this host: no runtime here loads it", t.Name, t.Format),
		Hint: "remove bench: from this target"}
}

// DecodeTargetOptions decodes a target's with: into opts (a new options
// value of its format, or nil for a format that takes none) and keeps it as
// the target's Options.
func DecodeTargetOptions(t *Target, opts any) Diagnostics {
	what := "targets." + t.Name + ".with"
	if opts == nil {
		if len(t.With) == 0 {
			return nil
		}
		return Diagnostics{{Pos: t.WithPos[""], Msg: fmt.Sprintf("%s: format %s takes no options", what, t.Format),
			Hint: "remove with: from this target"}}
	}
	diags := DecodeOptions(t.With, t.WithPos, what, opts)
	t.Options = opts
	return diags
}
