package recipe

import (
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
			f, ok := p.nonNegative(v, path+".max_drop")
			if ok && f > 1 {
				p.report(v, "write the drop as a fraction of the images: max_drop: 0.01 is one percentage point of top-1 accuracy",
					"%s.max_drop %s is over 1", path, v.Value)
				return
			}
			if ok {
				g.MaxDrop = f
			}
		}},
	})
	q.Accuracy = &g
}

// applyTask sets what an image-classification recipe takes by default
// (the accuracy gate, the built-in digits sets) and reports keys written
// for the other task.
func (p *parser) applyTask(r *Recipe) {
	if r.IsVision() {
		if r.Quality.Accuracy == nil {
			r.Quality.Accuracy = &AccuracyGate{MaxDrop: DefaultMaxAccuracyDrop}
		}
		if r.Data.Calibration == DefaultCalibration {
			r.Data.Calibration = DefaultVisionCalibration
		}
		if r.Data.Eval == DefaultEval {
			r.Data.Eval = DefaultVisionEval
		}
	}
	for i := range r.Targets {
		if r.IsVision() && r.Targets[i].KVDtypePos.Line == 0 {
			r.Targets[i].KVDtype = "" // an image classifier has no KV cache
		}
	}
	for _, k := range p.taskKeys {
		switch {
		case k.vision && !r.IsVision():
			p.report(k.node, k.hint, "%s applies only to image-classification recipes (task: image-classification)", k.path)
		case !k.vision && r.IsVision():
			p.report(k.node, k.hint, "%s applies only to text-generation recipes, and this one has task: image-classification", k.path)
		}
	}
}

// Fixes for text-generation keys in an image-classification recipe.
const (
	hintVisionGate = "gate an image classifier on accuracy instead: quality: {accuracy: {max_drop: 0.01}}"
	hintNoContext  = "remove it: an image classifier has no context, KV cache or tokens"
	hintNoBench    = "remove bench: from this target: on-host bench of image-classification formats is not built yet"
)
