package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/edgetext"
	"github.com/edgepipe/edgepipe/steps"
)

func cmdCeiling(env *Env, fs *pflag.FlagSet) runFunc {
	modelGB := fs.Float64("model-gb", 0, "model size in GB (1e9 bytes), e.g. 4.7 for an 8B model at 4 bits")
	recipePath := fs.String("recipe", "", "a recipe (or give it as the argument, as every command takes one): each target's published size, else its estimate from parameters x bits a weight")
	out := fs.StringP("out", "o", "", "where the recipe's artifacts were published (default artifacts/<recipe name>)")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 1 && *recipePath == "" {
			*recipePath = pos[0]
			pos = nil
		}
		if len(pos) > 0 || (*modelGB > 0) == (*recipePath != "") {
			return usageErr("ceiling takes --model-gb GB or a RECIPE, e.g. edgepipe ceiling --model-gb 4.7 or edgepipe ceiling recipes/demo.yaml")
		}
		if *modelGB > 0 {
			rows := catalog.Ceilings(*modelGB)
			if *asJSON {
				return writeJSON(env.Stdout, struct {
					ModelGB float64              `json:"model_gb"`
					Devices []catalog.CeilingRow `json:"devices"`
				}{*modelGB, rows})
			}
			fmt.Fprintf(env.Stdout, "Decode ceiling of a %g GB model: memory bandwidth / model size (decoding reads every weight once a token).\n", *modelGB)
			return edgetext.CeilingTable(env.Stdout, rows, "")
		}

		r, err := recipe.Load(*recipePath, plan.Catalog{}, append(steps.Names(), "publish"))
		if err != nil {
			return err
		}
		outDir := *out
		if outDir == "" {
			outDir = filepath.Join("artifacts", r.Name)
		}
		model := edge.ResolveModel(r.Model.Source, r.Dir())
		var targets []edgetext.CeilingTarget
		for _, t := range r.Targets {
			ct := edgetext.CeilingTarget{Target: t.Name, Device: t.Device, Format: t.Format}
			ct.ModelGB, ct.SizeFrom = edge.TargetSize(filepath.Join(outDir, t.Name), t.Format, model)
			if ct.ModelGB > 0 {
				ct.Devices = catalog.Ceilings(ct.ModelGB)
			}
			targets = append(targets, ct)
		}
		if *asJSON {
			return writeJSON(env.Stdout, struct {
				Recipe  string                   `json:"recipe"`
				Targets []edgetext.CeilingTarget `json:"targets"`
			}{r.Name, targets})
		}
		return edgetext.CeilingTargets(env.Stdout, targets)
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "->" in conversion lines stays readable
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// pickFlags are the flags pick and init share.
type pickFlags struct {
	task, params    string
	platform, model string
	maxMemGB        float64
	minTokS         float64
	context         int
	format          string
	// flags tells a --context given from the default (nil in tests: the
	// default), which yields to a model trained for less.
	flags *pflag.FlagSet
}

func (p *pickFlags) register(fs *pflag.FlagSet) {
	p.flags = fs
	fs.StringVar(&p.task, "task", "llm", "what the model does: llm (text generation) or vision (image classification)")
	fs.StringVar(&p.params, "params", "", "vision: the backbone's parameter budget, e.g. 2.5M (the platform guide's rule: MobileNetV3-Small under 3M, EfficientNet-Lite0 for 3-10M)")
	fs.StringVar(&p.platform, "platform", "", "target platform: "+strings.Join(edge.Platforms(), ", ")+" (several, comma-separated: a pick each; init writes one recipe with a target each)")
	fs.StringVar(&p.model, "model", "", "model source, as in a recipe: builtin:NAME, ./folder, hf://org/name")
	fs.Float64Var(&p.maxMemGB, "max-memory", 0, "memory budget in GB (1e9 bytes) for the model on the device")
	fs.Float64Var(&p.minTokS, "min-tok-s", 0, "decode speed budget in tokens per second")
	fs.IntVar(&p.context, "context", edge.DefaultContext, "context length in tokens the KV cache must hold (default: 4096, or the model's max_position_embeddings when less)")
	fs.StringVar(&p.format, "format", "", "use this format instead of the platform's choice (e.g. gguf-q4_k_m, which this build converts)")
}

// vision reports whether the pick is for a vision model, refusing flags
// that belong to the other task.
func (p *pickFlags) vision() (bool, error) {
	switch p.task {
	case "llm":
		if p.params != "" {
			return false, usageErr("--params is for --task vision; an LLM's size comes from --model")
		}
		return false, nil
	case "vision":
		if p.model != "" || p.format != "" || p.minTokS > 0 || p.maxMemGB > 0 || p.context != edge.DefaultContext {
			return true, usageErr("--task vision takes --platform and --params only (the LLM flags --model, --format, --min-tok-s, --max-memory and --context do not apply)")
		}
		return true, nil
	}
	return false, usageErr("--task %q: use llm or vision", p.task)
}

// pickVision is `pick --task vision`.
func (p *pickFlags) pickVision() (edge.VisionPick, error) {
	if p.platform == "" || p.params == "" {
		return edge.VisionPick{}, usageErr("name a --platform (%s) and the backbone's --params, e.g. --params 2.5M", strings.Join(edge.Platforms(), ", "))
	}
	n, err := edge.ParseParams(p.params)
	if err != nil {
		return edge.VisionPick{}, usageErr("%v", err)
	}
	vp, err := edge.PickVision(edge.VisionRequest{Platform: p.platform, Params: n})
	var unknown *edge.UnknownPlatformError
	if errors.As(err, &unknown) {
		return vp, usageErr("%v", err)
	}
	return vp, err
}

func (p *pickFlags) pick() (edge.Pick, error) {
	if p.platform == "" || p.model == "" {
		return edge.Pick{}, usageErr("name a --platform (%s) and a --model", strings.Join(edge.Platforms(), ", "))
	}
	if p.context <= 0 || p.maxMemGB < 0 || p.minTokS < 0 {
		return edge.Pick{}, usageErr("--context must be positive, --max-memory and --min-tok-s not negative")
	}
	ctx := p.context
	if p.flags == nil || !p.flags.Changed("context") {
		ctx = 0
	}
	model := edge.ResolveModel(p.model, ".")
	pk, err := edge.PickTarget(edge.PickRequest{
		Platform: p.platform, Model: model,
		Context: ctx, MaxMemoryGB: p.maxMemGB, MinTokensPerS: p.minTokS, Format: p.format,
		Refuses: func(format string) string {
			return plan.ArchitectureRefusal(recipe.TaskTextGeneration, format, model.Architecture)
		},
	})
	var badArch *edge.ArchitectureError
	var unknown *edge.UnknownPlatformError
	var badFormat *edge.FormatError
	var badModel *edge.ModelError
	var badContext *edge.ContextError
	if errors.As(err, &unknown) || errors.As(err, &badFormat) || errors.As(err, &badModel) || errors.As(err, &badContext) || errors.As(err, &badArch) {
		return pk, usageErr("%v", err)
	}
	return pk, err
}

// picks is pick for each platform of a comma-separated --platform
// (ios,android,browser): one model, one recipe, a target per platform.
func (p *pickFlags) picks() ([]edge.Pick, error) {
	var picks []edge.Pick
	seen := map[string]bool{}
	for _, platform := range strings.Split(p.platform, ",") {
		platform = strings.TrimSpace(platform)
		if platform == "" || seen[platform] {
			continue
		}
		seen[platform] = true
		one := *p
		one.platform = platform
		pk, err := one.pick()
		if err != nil {
			return nil, err
		}
		picks = append(picks, pk)
	}
	if len(picks) == 0 {
		_, err := p.pick() // an empty --platform: pick's usage error
		return nil, err
	}
	return picks, nil
}

// commandLine is the pick as a command, for the written recipe's header.
func (p *pickFlags) commandLine(cmd string) string {
	s := fmt.Sprintf("edgepipe %s --platform %s --model %s", cmd, shellWord(p.platform), shellWord(p.model))
	if p.context != edge.DefaultContext {
		s += fmt.Sprintf(" --context %d", p.context)
	}
	if p.maxMemGB > 0 {
		s += fmt.Sprintf(" --max-memory %g", p.maxMemGB)
	}
	if p.minTokS > 0 {
		s += fmt.Sprintf(" --min-tok-s %g", p.minTokS)
	}
	if p.format != "" {
		s += " --format " + shellWord(p.format)
	}
	return s
}

// shellWord quotes s for a POSIX shell when it holds anything but the
// characters sources and platforms are usually made of.
func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@+=,", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// pipelineFor expands a recipe text the way `edgepipe plan` would; a
// format without a built-in pipeline yet comes back as the reason.
func pipelineFor(path string, data []byte) ([]*plan.Step, error) {
	r, err := recipe.LoadBytes(path, data, plan.Catalog{}, append(steps.Names(), "publish"))
	if err != nil {
		return nil, err
	}
	pl, err := plan.Expand(r)
	if err != nil {
		return nil, err
	}
	return pl.Steps, nil
}

// pickJSON is `pick --json`: the pick and the steps it expands to.
type pickJSON struct {
	edge.Pick
	Steps           []pickStep `json:"steps,omitempty"`
	PipelineMissing string     `json:"pipeline_missing,omitempty"`
	// Instead is a command for a format this build converts that the
	// chosen device also runs, when the chosen format has no pipeline yet.
	Instead string `json:"instead,omitempty"`
}

type pickStep struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

func cmdPick(env *Env, fs *pflag.FlagSet) runFunc {
	var pf pickFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usageErr("pick takes flags only, e.g. edgepipe pick --platform ios --model builtin:smollm2-135m")
		}
		if vision, err := pf.vision(); err != nil {
			return err
		} else if vision {
			vp, err := pf.pickVision()
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, vp)
			}
			edgetext.PrintVisionPick(env.Stdout, vp)
			return nil
		}
		picks, err := pf.picks()
		if err != nil {
			return err
		}
		outs := make([]pickJSON, len(picks))
		for i, pk := range picks {
			one := pf
			one.platform = pk.Platform
			outs[i] = one.explain(pk)
		}
		if *asJSON {
			if len(outs) == 1 {
				return writeJSON(env.Stdout, outs[0])
			}
			return writeJSON(env.Stdout, outs)
		}
		for i, pj := range outs {
			if i > 0 {
				fmt.Fprintln(env.Stdout)
			}
			ids := make([]string, len(pj.Steps))
			for j, st := range pj.Steps {
				ids[j] = st.ID
			}
			edgetext.PrintPick(env.Stdout, pj.Pick, ids, pj.PipelineMissing, pj.Instead)
		}
		name := edge.RecipeName(picks[0].Platform)
		if len(picks) > 1 {
			fmt.Fprintf(env.Stdout, "\nWrite them as one recipe, a target each: %s -o recipes/%s.yaml\n", pf.commandLine("init"), "model")
			return nil
		}
		fmt.Fprintf(env.Stdout, "\nWrite it as a recipe: %s -o recipes/%s.yaml\n", pf.commandLine("init"), name)
		return nil
	}
}

// explain is one pick with the steps its recipe expands to, or why this
// build has no pipeline for it and what it could build instead.
func (p pickFlags) explain(pk edge.Pick) pickJSON {
	name := edge.RecipeName(pk.Platform)
	data := edge.RenderRecipe(pk, edge.RecipeOptions{Name: name, Source: p.model})
	stepList, expandErr := pipelineFor(name+".yaml", data)
	pj := pickJSON{Pick: pk}
	if expandErr != nil {
		pj.PipelineMissing = diagText(expandErr)
		pj.Instead = buildableInstead(p, pk)
	}
	for _, s := range stepList {
		pj.Steps = append(pj.Steps, pickStep{s.ID, s.Kind})
	}
	return pj
}

// diagText flattens diagnostics into one line: "message (hint)".
func diagText(err error) string {
	var diags recipe.Diagnostics
	if !errors.As(err, &diags) {
		return err.Error()
	}
	parts := make([]string, len(diags))
	for i, d := range diags {
		parts[i] = d.Msg
		if d.Hint != "" {
			parts[i] += " (" + d.Hint + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// buildableFormat is what the picker points to while the chosen format has
// no pipeline: the domain brief's GGUF type, which this build converts.
const buildableFormat = "gguf-q4_k_m"

// buildableInstead says how to get something this build can run on the
// chosen device now, or "" when the device does not load GGUF.
func buildableInstead(pf pickFlags, pk edge.Pick) string {
	d, ok := catalog.Lookup(pk.Device)
	if !ok || pk.Format == buildableFormat || !d.Runs(buildableFormat) {
		return ""
	}
	alt := pk
	alt.Format = buildableFormat
	if _, err := pipelineFor("instead.yaml", edge.RenderRecipe(alt, edge.RecipeOptions{Name: "instead", Source: pf.model})); err != nil {
		return ""
	}
	rt := d.RuntimeFor(buildableFormat)
	loads := ""
	for _, r := range d.Runtimes {
		if r.Name == rt {
			loads = r.Loads
		}
	}
	pf.format = buildableFormat
	return fmt.Sprintf("this build converts %s, and %s runs it through %s, which loads %s: %s", buildableFormat, d.ID, rt, loads, pf.commandLine("pick"))
}

func cmdInit(env *Env, fs *pflag.FlagSet) runFunc {
	var pf pickFlags
	pf.register(fs)
	out := fs.StringP("out", "o", "", "recipe file to write, e.g. recipes/iphone.yaml")
	// --output was init's name for it before every command's output flag
	// became -o/--out; kept so that scripts keep working.
	fs.StringVar(out, "output", "", "recipe file to write (the old name of --out)")
	_ = fs.MarkHidden("output")
	name := fs.String("name", "", "recipe name (default: from the file name)")
	force := fs.Bool("force", false, "overwrite an existing file")
	calibration := fs.String("calibration", "", "vision: the labelled calibration images (an .npz of images and labels, as a recipe's data: takes them) of a model that is not built in")
	eval := fs.String("eval", "", "vision: the labelled evaluation images the gate scores, for a model that is not built in")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 || *out == "" {
			return usageErr("init writes the recipe named by -o, e.g. edgepipe init --platform laptop --model builtin:smollm2-135m -o recipes/laptop.yaml")
		}
		if pf.task == "vision" {
			return initVision(env, &pf, *out, *name, *calibration, *eval, *force)
		}
		if *calibration != "" || *eval != "" {
			return usageErr("--calibration and --eval are for --task vision (an LLM recipe's data defaults to the built-in texts; edit data: in the written recipe)")
		}
		picks, err := pf.picks()
		if err != nil {
			return err
		}
		pk := picks[0]
		recipeName := *name
		if recipeName == "" {
			recipeName = edge.RecipeName(filepath.Base(*out))
		}
		source, err := edge.SourceFromRecipe(pf.model, *out)
		if err != nil {
			return err
		}
		data := edge.RenderRecipes(picks, edge.RecipeOptions{Name: recipeName, Source: source, Command: pf.commandLine("init"), SchemaLine: edge.SchemaLine(*out)})
		// The written file must parse and validate: a recipe that does not is
		// a bug here, not the user's to find.
		r, err := recipe.LoadBytes(*out, data, plan.Catalog{}, append(steps.Names(), "publish"))
		if err != nil {
			var diags recipe.Diagnostics
			if errors.As(err, &diags) && *name != "" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("the recipe would not be valid: %s", diagText(err))}
			}
			return fmt.Errorf("init wrote a recipe that does not validate (a bug in edgepipe): %s", diagText(err))
		}
		// What pick only warns of (a model that does not fit the device, a
		// speed over its ceiling), validate refuses: init writes no recipe
		// that validate would refuse, and says how to get one that passes.
		if pl, err := plan.Expand(r); err == nil && len(pl.Preflight) > 0 {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("nothing written: %s would not pass validate's pre-flight: %s", *out, diagText(pl.Preflight))}
		}
		if err := writeNew(*out, data, *force); err != nil {
			return err
		}
		if len(picks) == 1 {
			fmt.Fprintf(env.Stdout, "wrote %s: target %s, %s on %s\n", *out, pk.Platform, pk.Format, pk.Device)
		} else {
			parts := make([]string, len(picks))
			for i, p := range picks {
				parts[i] = fmt.Sprintf("%s (%s on %s)", p.Platform, p.Format, p.Device)
			}
			fmt.Fprintf(env.Stdout, "wrote %s: targets %s\n", *out, strings.Join(parts, ", "))
		}
		for _, p := range picks {
			for _, w := range p.Warnings {
				if len(picks) > 1 {
					w = p.Platform + ": " + w
				}
				fmt.Fprintf(env.Stdout, "warning: %s\n", w)
			}
		}
		if _, err := pipelineFor(*out, data); err != nil {
			fmt.Fprintf(env.Stdout, "note: this build cannot run it yet: %s\n", diagText(err))
			if instead := buildableInstead(pf, pk); instead != "" && len(picks) == 1 {
				fmt.Fprintf(env.Stdout, "note: meanwhile %s\n", strings.Replace(instead, "edgepipe pick", "edgepipe init", 1)+" -o "+*out+" --force")
			}
		} else {
			fmt.Fprintf(env.Stdout, "next: edgepipe plan %s\n", *out)
		}
		return nil
	}
}

// writeNew creates path with data, refusing to replace a file unless
// force; O_EXCL makes the refusal hold even against a concurrent writer.
func writeNew(path string, data []byte, force bool) error {
	if err := checkOutput("-o", path); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the recipe's folder: %w", err)
	}
	if force {
		if err := atomicfile.Write(path, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return usageErr("%s already exists; pass --force to overwrite it, or choose another -o", path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
