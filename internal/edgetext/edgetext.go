// Package edgetext renders the edge commands' answers (pick, ceiling) as
// text for a terminal.
package edgetext

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
)

// CeilingTable writes decode ceilings per device as a table, marking the
// device mark.
func CeilingTable(w io.Writer, rows []catalog.CeilingRow, mark string) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tBANDWIDTH GB/s\tCEILING tok/s\tOBSERVED tok/s\tOBSERVED/CEILING")
	for _, r := range rows {
		obs, ratio := "-", "-"
		if r.ObservedTokS > 0 {
			obs = strconv.FormatFloat(r.ObservedTokS, 'g', -1, 64)
			ratio = strconv.FormatFloat(r.ObservedOverCeiling, 'f', 2, 64)
		}
		tail := ""
		if r.Device == mark {
			tail = "\t<- target device"
		}
		fmt.Fprintf(tw, "%s\t%g\t%.1f\t%s\t%s%s\n", r.Device, r.BandwidthGBs, r.CeilingTokS, obs, ratio, tail)
	}
	return tw.Flush()
}

// PrintPick writes pick's answer: device, format, model, memory, decode
// speed and the pipeline's steps (stepIDs), with the reasons and warnings.
func PrintPick(w io.Writer, pk edge.Pick, stepIDs []string, missing, instead string) {
	pr := pk.Prediction
	d, _ := catalog.Lookup(pk.Device)
	row := func(label, format string, args ...any) { pickRow(w, label, format, args...) }
	row("platform", "%s: %s", pk.Platform, pk.Summary)
	row("device", "%s: %s, %g GB/s, %g GB (%g GB left to apps)", d.ID, d.Name, d.MemoryBandwidthGBs, d.MemoryGB, d.MemoryGB-d.OSReservedGB)
	row("format", "%s, KV cache %s, context %d", pk.Format, pk.KVDtype, pk.Context)
	if pr.Model.HasParams() {
		row("model", "%s: %s parameters, %.3g GB in %s (%s)", pr.Model.Source, edge.Params(pr.Model.Shape.Params), pr.WeightsGB, pk.Format, pr.Model.From)
	} else {
		row("model", "%s: shape unknown, so memory and speed were not checked", pr.Model.Source)
	}
	if m := pr.Memory; m != nil {
		verdict := "fits"
		if !m.OK() {
			verdict = "does NOT fit"
		}
		limit := fmt.Sprintf("%.2f GB left to apps", m.AvailableGB)
		if m.LimitIsBudget {
			limit = fmt.Sprintf("the %g GB budget", m.LimitGB)
		}
		row("memory", "%.2f GB against %s: %s (weights %.2f + KV cache %.2f + overhead %.2f GB)", m.NeedGB, limit, verdict, m.WeightsGB, m.KVGB, m.OverheadGB)
	}
	if s := pr.Speed; s != nil {
		line := fmt.Sprintf("ceiling %.1f tok/s (%g GB/s / %.2f GB)", s.CeilingTokS, s.BandwidthGBs, s.ModelGB)
		if s.ExpectedTokS > 0 {
			line += fmt.Sprintf("; expected about %.1f tok/s: %s", s.ExpectedTokS, s.Observation)
		} else {
			line += "; no field observation on this device, so the ceiling is the only figure"
		}
		row("decode", "%s", line)
	}
	if missing != "" {
		row("pipeline", "not available in this build: %s", missing)
	} else {
		row("pipeline", "%s", strings.Join(stepIDs, " -> "))
	}
	if pk.Conversion != "" {
		row("", "conversion: %s", pk.Conversion)
	}
	if instead != "" {
		row("", "meanwhile: %s", instead)
	}
	printReasons(w, pk.Reasons, pk.Warnings)
	printList(w, "notes", pr.Notes)
}

// printList writes a titled bullet list, nothing when items is empty.
func printList(w io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintln(w, title)
	for _, it := range items {
		fmt.Fprintf(w, "  - %s\n", it)
	}
}

// printReasons writes a pick's reasons and its warnings, each marked.
func printReasons(w io.Writer, reasons, warnings []string) {
	printList(w, "why", reasons)
	marked := make([]string, len(warnings))
	for i, wn := range warnings {
		marked[i] = "warning: " + wn
	}
	printList(w, "warnings", marked)
}

// pickRow writes one labelled line of a pick.
func pickRow(w io.Writer, label, format string, args ...any) {
	fmt.Fprintf(w, "%-9s %s\n", label, fmt.Sprintf(format, args...))
}

// PrintVisionPick writes `pick --task vision`'s answer: backbone,
// runtime, format, method, gate and how to decide, with the reasons.
func PrintVisionPick(w io.Writer, vp edge.VisionPick) {
	row := func(label, format string, args ...any) { pickRow(w, label, format, args...) }
	row("platform", "%s: %s", vp.Platform, vp.Summary)
	row("task", "%s, a budget of %s parameters", vp.Task, edge.Params(int64(vp.Params)))
	backbone := vp.Backbone
	if vp.Builtin != "" {
		backbone += " (model.source: " + vp.Builtin + ")"
	}
	row("backbone", "%s", backbone)
	row("runtime", "%s", vp.Runtime)
	if vp.Built {
		row("format", "%s", vp.Format)
	} else {
		row("format", "%s (not in this build; it converts %s)", vp.Format, vp.Buildable)
	}
	row("method", "%s", vp.Method)
	row("gate", "%s", vp.Gate)
	row("decide", "%s", vp.Decide)
	printReasons(w, vp.Reasons, vp.Warnings)
}

// CeilingTarget is one recipe target's row set in `ceiling --recipe`.
type CeilingTarget struct {
	Target   string               `json:"target"`
	Device   string               `json:"device"`
	Format   string               `json:"format"`
	ModelGB  float64              `json:"model_gb,omitempty"`
	SizeFrom string               `json:"size_from"`
	Devices  []catalog.CeilingRow `json:"devices,omitempty"`
}

// CeilingTargets writes each recipe target's size and its ceilings per
// device (`ceiling --recipe`).
func CeilingTargets(w io.Writer, targets []CeilingTarget) error {
	for i, ct := range targets {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if ct.ModelGB <= 0 {
			fmt.Fprintf(w, "target %s (%s for %s): size unknown: %s\n", ct.Target, ct.Format, ct.Device, ct.SizeFrom)
			continue
		}
		fmt.Fprintf(w, "target %s (%s for %s): %.3g GB, %s\n", ct.Target, ct.Format, ct.Device, ct.ModelGB, ct.SizeFrom)
		if err := CeilingTable(w, ct.Devices, ct.Device); err != nil {
			return err
		}
	}
	return nil
}
