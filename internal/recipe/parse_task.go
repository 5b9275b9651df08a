package recipe

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// taskKey is a key only one task takes, remembered where it was written
// and judged once the whole recipe is read (task: may come after it).
type taskKey struct {
	node   *yaml.Node
	path   string
	vision bool // image classification only; else text generation only
	hint   string
}

// onlyFor remembers a key that only one task takes; hint is the fix for a
// recipe of the other task.
func (p *parser) onlyFor(n *yaml.Node, path string, vision bool, hint string) {
	p.taskKeys = append(p.taskKeys, taskKey{node: n, path: path, vision: vision, hint: hint})
}

func (p *parser) task(v *yaml.Node, r *Recipe) {
	s, ok := p.str(v, "task")
	if !ok {
		return
	}
	if !slices.Contains(Tasks, s) {
		p.report(v, closestOrList(s, Tasks, "tasks"), "task %q is not a task edgepipe knows", s)
		return
	}
	r.TaskPos = p.pos(v)
	if s != TaskTextGeneration { // the default is written as ""
		r.Task = s
	}
}

// accuracy reads a quality.accuracy section into q (a fresh copy, so a
// target's override never changes the recipe's default).
func (p *parser) accuracy(k, v *yaml.Node, path string, q *Quality) {
	p.onlyFor(k, path, true, "add task: image-classification to the recipe, or gate a text-generation model with quality.perplexity")
	g := AccuracyGate{MaxDrop: DefaultMaxAccuracyDrop}
	if q.Accuracy != nil {
		g = *q.Accuracy
	}
	p.object(v, path, []field{
		{"max_drop", func(_, v *yaml.Node) {
			if f, ok := p.fraction(v, path+".max_drop", "write the drop as a fraction of the images: max_drop: 0.01 is one percentage point of top-1 accuracy"); ok {
				g.MaxDrop = f
			}
		}},
	})
	q.Accuracy = &g
}

// fraction reads a share of the images, 0 to 1; over 1 is reported at
// the value with hint.
func (p *parser) fraction(v *yaml.Node, key, hint string) (float64, bool) {
	f, ok := p.nonNegative(v, key)
	if ok && f > 1 {
		p.report(v, hint, "%s %s is over 1", key, v.Value)
		return 0, false
	}
	return f, ok
}

// agreement reads a quality.agreement section into q. On a target it
// replaces the accuracy gate the target inherited by default (not one
// the recipe wrote), so a target can gate on agreement alone.
func (p *parser) agreement(k, v *yaml.Node, path string, q *Quality) {
	p.onlyFor(k, path, true, "add task: image-classification to the recipe, or gate a text-generation model with quality.perplexity")
	g := AgreementGate{Min: DefaultMinAgreement}
	if q.Agreement != nil {
		g = *q.Agreement
	}
	p.object(v, path, []field{
		{"min", func(_, v *yaml.Node) {
			if f, ok := p.fraction(v, path+".min", "write the agreement as a fraction of the images: min: 0.99 is 99% of them"); ok {
				g.Min = f
			}
		}},
	})
	q.Agreement = &g
	if q.Accuracy != nil && q.Accuracy.defaulted {
		q.Accuracy = nil
	}
}

// generation reads a quality.generation section into q (a fresh copy, so a
// target's override never changes the recipe's default): the bounds of the
// decode check, a text-generation recipe's only.
func (p *parser) generation(k, v *yaml.Node, path string, q *Quality) {
	p.onlyFor(k, path, false, "remove it: an image classifier generates no text; gate it with quality.accuracy or quality.agreement")
	g := *DefaultGeneration()
	if q.Generation != nil {
		g = *q.Generation
	}
	p.object(v, path, []field{
		{"min_token_agreement", func(_, v *yaml.Node) {
			if f, ok := p.fraction(v, path+".min_token_agreement", "write the agreement as a fraction of the decoded tokens: min_token_agreement: 0.9 is 90% of them"); ok {
				g.MinTokenAgreement = f
			}
		}},
		{"max_mean_kl", func(_, v *yaml.Node) {
			if f, ok := p.nonNegative(v, path+".max_mean_kl"); ok {
				g.MaxMeanKL = f
			}
		}},
		{"max_new_tokens", func(_, v *yaml.Node) {
			n, ok := p.positiveInt(v, path+".max_new_tokens")
			if ok && n > MaxMaxNewTokens {
				p.report(v, fmt.Sprintf("use %d or fewer: every token is decoded by the original model and again for each target", MaxMaxNewTokens),
					"%s %d is over %d", path+".max_new_tokens", n, MaxMaxNewTokens)
				return
			}
			if ok {
				g.MaxNewTokens = n
			}
		}},
	})
	q.Generation = &g
}

// applyTask sets what an image-classification recipe takes by default
// (the accuracy gate, the built-in digits sets) and reports keys written
// for the other task.
func (p *parser) applyTask(r *Recipe) {
	if r.Traits().Images {
		// An image classifier generates no text: no decode check.
		r.Quality.Generation = nil
		// The accuracy gate is the default, unless the recipe gates on
		// agreement (which needs no labels) instead.
		if r.Quality.Accuracy == nil && r.Quality.Agreement == nil {
			r.Quality.Accuracy = &AccuracyGate{MaxDrop: DefaultMaxAccuracyDrop, defaulted: true}
		}
		if r.Data.Calibration == DefaultCalibration {
			r.Data.Calibration = DefaultVisionCalibration
		}
		if r.Data.Eval == DefaultEval {
			r.Data.Eval = DefaultVisionEval
		}
	}
	for i := range r.Targets {
		if r.Traits().Images && r.Targets[i].KVDtypePos.Line == 0 {
			r.Targets[i].KVDtype = "" // an image classifier has no KV cache
		}
		if r.Traits().Images {
			r.Targets[i].Quality.Generation = nil
		}
		benchForTask(r.Targets[i].Bench, r.Traits().Images)
	}
	benchForTask(r.Bench, r.Traits().Images)
	p.checkUnlabelled(r)
	for _, k := range p.taskKeys {
		switch {
		case k.vision && !r.Traits().Images:
			p.report(k.node, k.hint, "%s applies only to image-classification recipes (task: image-classification)", k.path)
		case !k.vision && r.Traits().Images:
			p.report(k.node, k.hint, "%s applies only to text-generation recipes, and this one has task: image-classification", k.path)
		}
	}
}

// benchForTask clears the bench settings the recipe's task has no use
// for (their defaults were filled in before the task was known), so a
// saved plan shows only what the bench uses.
func benchForTask(b *BenchSpec, vision bool) {
	if b == nil {
		return
	}
	if vision {
		b.PromptTokens, b.ProbeMiB = 0, 0
	} else {
		b.Batch = 0
	}
}

// checkUnlabelled refuses an accuracy gate on a built-in set that has no
// labels: top-1 accuracy cannot be measured there, agreement can. (A set
// given as a file is only read when the run scores it, and fails then.)
func (p *parser) checkUnlabelled(r *Recipe) {
	if !r.Traits().Images || !slices.Contains(UnlabelledVisionSets, r.Data.Eval) {
		return
	}
	for _, t := range r.Targets {
		if t.Quality.Accuracy == nil {
			continue
		}
		p.add(Diagnostic{Pos: r.Data.Pos, Hint: "gate on top-1 agreement with the fp32 model, which needs no labels: quality: {agreement: {min: 0.99}} (and no quality.accuracy), or evaluate on a labelled set",
			Msg: fmt.Sprintf("target %s gates on top-1 accuracy, but data.eval %s has no labels", t.Name, r.Data.Eval)})
		return
	}
}

// Fixes for text-generation keys in an image-classification recipe.
const (
	hintVisionGate = "gate an image classifier on accuracy instead: quality: {accuracy: {max_drop: 0.01}}"
	hintNoContext  = "remove it: an image classifier has no context, KV cache or tokens"
	// Bench keys of one task only.
	hintBenchTextKey = "remove it: an image classifier's bench times single inferences of bench.batch images at the model's input size (config.json), with no prompt or bandwidth probe"
	hintBenchBatch   = "remove it: a text model's bench input is set by bench.prompt_tokens"
	hintRecipeBench  = "write bench: under each target to measure: a text-generation recipe benches per target (not every format runs here token by token)"
)
