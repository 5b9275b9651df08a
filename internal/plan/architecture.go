package plan

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// refusedArchitecture is the diagnostic for a target whose format cannot
// take the model's architecture, at its format: key, naming the formats
// that would on its device; nil when it can, or when plan time does not
// know the architecture (a model downloaded at run time).
func refusedArchitecture(r *recipe.Recipe, t *recipe.Target, format string, fam *Family, m edge.Model) *recipe.Diagnostic {
	arch := m.Architecture
	why := fam.refuses(format, arch)
	if why == "" {
		return nil
	}
	pos := t.FormatPos
	if pos.Line == 0 {
		pos = t.Pos
	}
	hint := "no other format edgepipe builds takes this architecture either: convert it with the model's own tools, or use a model of another architecture"
	if alt := formatsTaking(r.Task, arch, t.Device); len(alt) > 0 {
		hint = fmt.Sprintf("formats that take %s models on %s: %s", arch, t.Device, strings.Join(alt, ", "))
	} else if alt := formatsTaking(r.Task, arch, ""); len(alt) > 0 {
		hint = fmt.Sprintf("no format %s runs takes %s models; formats that do, on other devices: %s", t.Device, arch, strings.Join(alt, ", "))
	}
	return &recipe.Diagnostic{Pos: pos,
		Msg:  fmt.Sprintf("target %q: %s cannot take a %s model (%s): %s", t.Name, format, arch, r.Model.Source, why),
		Hint: hint}
}

// ArchitectureRefusal says why a format cannot take a model architecture
// (a config.json model_type), or "" when it can or no family of the task
// builds the format.
func ArchitectureRefusal(task, format, arch string) string {
	fam, ok := FamilyFor(task, format)
	if !ok {
		return ""
	}
	return fam.refuses(format, arch)
}

// refuses is Refuses for a known architecture; an unknown one ("": plan
// time could not read it) or a family without Refuses takes it.
func (f *Family) refuses(format, arch string) string {
	if arch == "" || f.Refuses == nil {
		return ""
	}
	return f.Refuses(format, arch)
}

// formatsTaking lists the formats of a task that take an architecture, on
// a device ("" for any), in the catalog's order; a family with many (GGUF's
// types) by its summary.
func formatsTaking(task, arch, device string) []string {
	var dev catalog.Device
	if device != "" {
		d, ok := catalog.Lookup(device)
		if !ok {
			return nil
		}
		dev = d
	}
	var order []*Family
	byFamily := map[*Family][]string{}
	for _, f := range catalog.Formats() {
		fam, ok := FamilyFor(task, f.Name)
		if !ok || fam.Expand == nil || fam.refuses(f.Name, arch) != "" {
			continue
		}
		if (fam.Task == "") != (task == "" || task == recipe.TaskTextGeneration) {
			continue
		}
		if device != "" && !dev.Runs(f.Name) {
			continue
		}
		if byFamily[fam] == nil {
			order = append(order, fam)
		}
		byFamily[fam] = append(byFamily[fam], f.Name)
	}
	var out []string
	for _, fam := range order {
		if names := byFamily[fam]; len(names) > 3 && fam.Formats.Summary != "" {
			out = append(out, fam.Formats.Summary)
		} else {
			out = append(out, names...)
		}
	}
	return out
}
