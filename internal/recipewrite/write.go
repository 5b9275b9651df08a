// Package recipewrite renders a recipe back to YAML, the way a person would
// write it (what `edgepipe init` saves).
package recipewrite

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

// Write renders a recipe in format version 1, the way a person would write
// it: the documented key order, a blank line between sections, and only
// what differs from the defaults (quality, data) or is set (budgets,
// with:). header lines become comments at the top, the first of them
// usually the schema modeline. What it writes parses back to the same
// recipe; the sections it does not write (steps, toolchains, bench,
// publish) are left out.
func Write(r *recipe.Recipe, header []string) []byte {
	var b strings.Builder
	line := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	for _, h := range header {
		if h == "" {
			b.WriteString("#\n")
			continue
		}
		line(0, "# %s", h)
	}
	line(0, "edgepipe: %d", recipe.FormatVersion)
	line(0, "name: %s", Scalar(r.Name))
	if r.Description != "" {
		line(0, "description: %s", Scalar(r.Description))
	}
	b.WriteByte('\n')
	line(0, "model:")
	line(1, "source: %s", Scalar(r.Model.Source))
	if r.Model.AllowPickle {
		line(1, "allow_pickle: true")
	}
	if r.Model.TrustRemoteCode {
		line(1, "trust_remote_code: true")
	}
	if (r.Data.Calibration != "" && r.Data.Calibration != recipe.DefaultCalibration) || (r.Data.Eval != "" && r.Data.Eval != recipe.DefaultEval) || r.Data.AllowOverlap {
		b.WriteByte('\n')
		line(0, "data:")
		if r.Data.Calibration != "" && r.Data.Calibration != recipe.DefaultCalibration {
			line(1, "calibration: %s", Scalar(r.Data.Calibration))
		}
		if r.Data.Eval != "" && r.Data.Eval != recipe.DefaultEval {
			line(1, "eval: %s", Scalar(r.Data.Eval))
		}
		if r.Data.AllowOverlap {
			line(1, "allow_overlap: true")
		}
	}
	if q := qualitySection(r.Quality); len(q) > 0 {
		b.WriteByte('\n')
		line(0, "quality:")
		for _, l := range q {
			line(1, "%s", l)
		}
	}
	b.WriteByte('\n')
	line(0, "targets:")
	for _, t := range r.Targets {
		line(1, "%s:", t.Name)
		line(2, "device: %s", Scalar(t.Device))
		line(2, "format: %s", Scalar(t.Format))
		if t.Context > 0 {
			line(2, "context: %d", t.Context)
		}
		if t.KVDtype != "" {
			line(2, "kv_dtype: %s", t.KVDtype)
		}
		if q := targetQuality(r, &t); q != "" {
			line(2, "quality: %s", q)
		}
		if len(t.With) > 0 {
			keys := make([]string, 0, len(t.With))
			for k := range t.With {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			line(2, "with:")
			for _, k := range keys {
				line(3, "%s: %s", k, Scalar(t.With[k]))
			}
		}
		for _, budget := range []struct {
			key string
			v   float64
		}{{"min_tokens_per_s", t.MinTokensPerS}, {"max_memory_gb", t.MaxMemoryGB}, {"max_first_token_ms", t.MaxFirstTokenMS}} {
			if budget.v > 0 {
				line(2, "%s: %s", budget.key, strconv.FormatFloat(budget.v, 'g', -1, 64))
			}
		}
	}
	return []byte(b.String())
}

var defaultGate = recipe.PerplexityGate{Context: recipe.DefaultPPLContext, WarnDelta: recipe.DefaultWarnDelta, MaxDelta: recipe.DefaultMaxDelta}

// gateDiff lists the perplexity settings of g that differ from base, as
// YAML lines.
func gateDiff(g, base recipe.PerplexityGate) []string {
	var out []string
	if g.Context != base.Context && g.Context != 0 {
		out = append(out, fmt.Sprintf("context: %d", g.Context))
	}
	if g.MaxChunks != base.MaxChunks {
		out = append(out, fmt.Sprintf("max_chunks: %d", g.MaxChunks))
	}
	if g.WarnDelta != base.WarnDelta {
		out = append(out, "warn_delta: "+strconv.FormatFloat(g.WarnDelta, 'g', -1, 64))
	}
	if g.MaxDelta != base.MaxDelta {
		out = append(out, "max_delta: "+strconv.FormatFloat(g.MaxDelta, 'g', -1, 64))
	}
	return out
}

// qualitySection is the recipe's quality: section as lines indented
// under it; none when every setting is the default.
func qualitySection(q recipe.Quality) []string {
	var out []string
	if g := gateDiff(q.Perplexity, defaultGate); len(g) > 0 {
		out = append(out, "perplexity:")
		for _, kv := range g {
			out = append(out, "  "+kv)
		}
	}
	if gen := generationDiff(q.Generation, recipe.DefaultGeneration()); len(gen) > 0 {
		out = append(out, "generation:")
		for _, kv := range gen {
			out = append(out, "  "+kv)
		}
	}
	return out
}

// targetQuality is a target's quality: as a flow mapping, "" when it is
// the recipe's. Of the perplexity gate a target may override only
// max_delta (its warn band follows); its generation gate is its own.
func targetQuality(r *recipe.Recipe, t *recipe.Target) string {
	var q []string
	if md := t.Quality.Perplexity.MaxDelta; md != r.Quality.Perplexity.MaxDelta {
		q = append(q, fmt.Sprintf("perplexity: {max_delta: %s}", strconv.FormatFloat(md, 'g', -1, 64)))
	}
	if gen := generationDiff(t.Quality.Generation, r.Quality.Generation); len(gen) > 0 {
		q = append(q, "generation: {"+strings.Join(gen, ", ")+"}")
	}
	if len(q) == 0 {
		return ""
	}
	return "{" + strings.Join(q, ", ") + "}"
}

// generationDiff lists the generation gate settings of g that differ from
// base's, as YAML key: value pairs (none for a recipe without the gate).
func generationDiff(g, base *recipe.GenerationGate) []string {
	if g == nil || base == nil {
		return nil
	}
	var out []string
	if g.MinTokenAgreement != base.MinTokenAgreement {
		out = append(out, "min_token_agreement: "+strconv.FormatFloat(g.MinTokenAgreement, 'g', -1, 64))
	}
	if g.MaxMeanKL != base.MaxMeanKL {
		out = append(out, "max_mean_kl: "+strconv.FormatFloat(g.MaxMeanKL, 'g', -1, 64))
	}
	if g.MaxNewTokens != base.MaxNewTokens {
		out = append(out, fmt.Sprintf("max_new_tokens: %d", g.MaxNewTokens))
	}
	return out
}

// Scalar is v as a YAML flow scalar that reads back as the same value: a
// plain string when YAML keeps it a string, else quoted.
func Scalar(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return strconv.Quote(fmt.Sprint(v))
	}
	s := strings.TrimSuffix(string(b), "\n")
	if strings.Contains(s, "\n") {
		// A multi-line block: one double-quoted line instead.
		return strconv.Quote(fmt.Sprint(v))
	}
	return s
}
