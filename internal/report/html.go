package report

import (
	"bytes"
	"fmt"
	"html/template"
	"path"
)

// HTML renders report.html: one self-contained page, styles and charts
// inline, nothing fetched, so it opens offline and from a CI artifact.
// html/template escapes every value (target names, tool messages, log
// lines); the markup is also well-formed XML, which the tests check.
func HTML(r Report) ([]byte, error) {
	type targetView struct {
		Target
		Size     string
		Tools    string
		Chart    *chart
		HostName string
		// EarlierAt is when an earlier run published the target.
		EarlierAt string
	}
	view := struct {
		Report
		Targets      []targetView
		Decision     []DecisionRow
		DecisionNote string
		// AnyGeneration: a target ran a decode check (the Generation
		// column is left out of a report that has none).
		AnyGeneration bool
		Summary       Summary
		Legend        []LegendRow
		PublishedLine string
	}{Report: r, Decision: r.Decision(), AnyGeneration: r.anyGeneration(), Summary: r.Summary(), Legend: r.Legend(),
		PublishedLine: r.PublishedLine()}
	view.DecisionNote = decisionNote(view.Decision, r)
	for _, t := range r.Targets {
		tv := targetView{Target: t, Tools: tools(t), Chart: newChart(t, r.Ceilings(t))}
		if t.SizeBytes > 0 {
			tv.Size = HumanBytes(t.SizeBytes)
		}
		if t.Earlier {
			tv.EarlierAt = earlierAt(t)
		}
		if t.Bench != nil {
			tv.HostName = t.Bench.Host
		}
		view.Targets = append(view.Targets, tv)
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, view); err != nil {
		return nil, fmt.Errorf("render report.html: %w", err)
	}
	return buf.Bytes(), nil
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"f":       func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":      func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"top1":    func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) },
	"f4":      func(v float64) string { return fmt.Sprintf("%.4f", v) },
	"delta":   func(v float64) string { return fmt.Sprintf("%+.3f", v) },
	"deltaci": DeltaCell,
	"ppl":     func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"toks":    tokS,
	"pct":     percent,
	"agree":   Agreement,
	"gen":     GenerationCell,
	"deref":   func(p *float64) float64 { return *p },
	"line":    printable,
	"minus":   func(a, b float64) float64 { return a - b },
	"base":    path.Base,
}).Parse(pageTemplate))

// earlierAt is when an earlier run published t, or "" when unknown.
func earlierAt(t Target) string {
	if t.PublishedAt.IsZero() {
		return ""
	}
	return t.PublishedAt.UTC().Format("2006-01-02 15:04 UTC")
}

const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>edgepipe run: {{.Recipe}}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em 1.5em; color: #1b1f24; }
p, h1, h2, figure { max-width: 70em; }
.wide { overflow-x: auto; }
td.name, td code, td.n, .id { white-space: nowrap; }
td.tools { font-size: 0.9em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f6f8fa; }
.fail { color: #b42318; font-weight: 600; } .excellent { color: #1a7f37; } .ok { color: #9a6700; }
.standin { background: #fff8c5; padding: 0 0.3em; border-radius: 3px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.92em; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; }
.note { color: #57606a; }
.summary { border: 1px solid #d0d7de; border-left: 4px solid #3d8bfd; border-radius: 4px; padding: 0.2em 1em 0.6em; max-width: 70em; }
.summary h2 { margin-top: 0.6em; }
.summary ul { margin: 0.2em 0 0.6em; } .summary ul ul { margin: 0.1em 0; }
table.legend { margin-top: 1em; font-size: 0.92em; } table.legend td { max-width: 60em; }
</style>
</head>
<body>
<h1>edgepipe run: {{.Recipe}}</h1>
<p>{{.PublishedLine}}</p>
{{- if .RunLine}}
<p class="note">{{.RunLine}}.</p>
{{- end}}
<section class="summary">
<h2>Summary</h2>
{{- with .Summary}}
<p><strong>Ship:</strong>{{if not .Ship}} nothing: no target was published.{{end}}</p>
{{- if .Ship}}
<ul>
{{- range .Ship}}
<li><strong>{{.Target}}</strong>: <code>{{.Format}}</code> on {{.Device}}, {{.Size}}, {{if .Verdict}}<span class="{{.Verdict}}">{{.Verdict}}</span>{{else}}published (no gate){{end}} ({{.Measure}}){{if .Earlier}}; <em>{{.Earlier}}</em>{{end}}{{range .Notes}}; {{.}}{{end}}{{range .Cautions}}; <strong class="fail">{{.}}</strong>{{end}}</li>
{{- end}}
</ul>
{{- end}}
{{- if or .Failed .Other}}
<p><strong>Failed:</strong></p>
<ul>
{{- range .Failed}}
<li><strong>{{.Target}}</strong> (<code>{{.Format}}</code> on {{.Device}}): <span class="fail">{{line .Why}}</span>{{range .Notes}}; {{.}}{{end}}</li>
{{- end}}
{{- range .Other}}
<li>{{if .Step}}<strong>step {{.Step}}</strong>: {{else if .Target}}<strong>{{.Target}}</strong>: {{end}}<span class="fail">{{line .Why}}</span></li>
{{- end}}
</ul>
{{- end}}
{{- if .NotRun}}
<p><strong>Not built:</strong></p>
<ul>
{{- range .NotRun}}
<li><strong>{{.Target}}</strong> (<code>{{.Format}}</code> on {{.Device}}): {{line .Why}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .HasTry}}
<p><strong>What to try:</strong></p>
<ul>
{{- range .Failed}}
<li><strong>{{.Target}}</strong>:<ul>{{range .Try}}<li>{{line .}}</li>{{end}}</ul></li>
{{- end}}
{{- range .NotRun}}
<li><strong>{{.Target}}</strong>:<ul>{{range .Try}}<li>{{line .}}</li>{{end}}</ul></li>
{{- end}}
{{- range .Other}}{{if .Try}}
<li><strong>step {{.Step}}</strong>:<ul>{{range .Try}}<li>{{line .}}</li>{{end}}</ul></li>
{{- end}}{{end}}
</ul>
{{- end}}
{{- end}}
{{- if .SourceNote}}
<p class="note">{{.SourceNote}}</p>
{{- end}}
</section>
{{- if .Legend}}
<table class="legend">
<thead><tr><th colspan="2">Legend</th></tr></thead>
<tbody>
{{- range .Legend}}
<tr><td class="name">{{if or (eq .Term "excellent") (eq .Term "ok") (eq .Term "fail")}}<span class="{{.Term}}">{{.Term}}</span>{{else if eq .Term "stand-in"}}<span class="standin">{{.Term}}</span>{{else}}{{.Term}}{{end}}</td><td>{{.Meaning}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
<h2>Targets</h2>
<div class="wide">
<table>
<thead><tr><th>Target</th><th>Format</th><th>Device</th><th>Size</th><th>Baseline</th><th>Perplexity</th><th>Delta</th><th>Verdict</th><th>KL divergence</th><th>Top-1 agreement</th>{{if .AnyGeneration}}<th>Generation</th>{{end}}<th>Tools</th><th>Artifact</th></tr></thead>
<tbody>
{{- range .Targets}}
<tr>
<td class="name">{{.Name}}</td><td><code>{{.Format}}</code></td><td class="name">{{.Device}}</td>
<td class="n">{{if .Size}}{{.Size}}{{if ne .Outcome "published"}}<br/><span class="note">not published</span>{{end}}{{else}}-{{end}}</td>
{{- if .Perplexity}}
<td class="n">{{ppl .Perplexity.Baseline}}</td><td class="n">{{ppl .Perplexity.Converted}}</td><td class="n">{{deltaci .Perplexity.Delta .Perplexity.DeltaCI95}}<br/><span class="note">max {{f2 .Perplexity.MaxDelta}}</span></td>
{{- else if .Accuracy}}
<td class="n">{{top1 .Accuracy.Reference}}<br/><span class="note">top-1, PyTorch fp32</span></td><td class="n">{{top1 .Accuracy.Converted}}<br/><span class="note">top-1</span></td><td class="n">drop {{top1 .Accuracy.Drop}}<br/><span class="note">max {{top1 .Accuracy.MaxDrop}}</span></td>
{{- else if .Agreement}}
<td class="n">-<br/><span class="note">unlabelled: no accuracy</span></td><td class="n">{{top1 .Agreement.Agreement}}<br/><span class="note">top-1 agreement with PyTorch fp32</span></td><td class="n">-<br/><span class="note">min {{top1 .Agreement.Min}}</span></td>
{{- else}}
<td class="n">-</td><td class="n">-</td><td class="n">-</td>
{{- end}}
<td>{{if .Verdict}}<span class="{{.Verdict}}">{{.Verdict}}</span>{{else if eq .Outcome "published"}}published (no gate){{else}}-{{end}}</td>
<td class="n">{{if .KLDivergence}}{{f4 (deref .KLDivergence)}}{{else}}-{{end}}</td>
<td class="n">{{if .Top1Agreement}}{{agree (deref .Top1Agreement)}}{{else}}-{{end}}</td>
{{- if $.AnyGeneration}}
<td class="n">{{gen .Generation}}</td>
{{- end}}
<td class="tools">{{if .StandIns}}<span class="standin">stand-in:</span> {{range $i, $s := .StandIns}}{{if $i}}, {{end}}<span class="id">{{$s}}</span>{{end}}{{else}}real{{end}}</td>
<td>{{if eq .Outcome "published"}}{{if .Manifest}}<a href="{{.Manifest}}"><code>{{.Artifact}}</code></a>{{else}}<code>{{.Artifact}}</code>{{end}}{{range .Pushed}}, <code>{{.}}</code>{{end}}{{range .PushFailed}}, <strong>push to <code>{{.}}</code> failed</strong>{{end}}{{if .Earlier}}<br/><span class="note">earlier run{{if .EarlierAt}}, {{.EarlierAt}}{{end}}</span>{{end}}{{else if eq .Outcome "gate-failed"}}not published (gate failed){{else if eq .Outcome "blocked"}}not published (upstream failed){{else if .StoppedBy}}not run (stopped after <code>{{.StoppedBy}}</code> failed){{else}}not published{{end}}</td>
</tr>
{{- end}}
</tbody>
</table>
</div>
{{- if .Decision}}
<h2>Decision table</h2>
<p class="note">{{.DecisionNote}}</p>
<div class="wide">
<table>
<thead><tr><th>Target</th><th>Format</th><th>Runtime</th><th>Size</th><th>Top-1 (or agreement)</th><th>Drop</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>Images/s</th><th>Peak RSS</th><th>RSS growth</th><th>Verdict</th></tr></thead>
<tbody>
{{- range .Decision}}
<tr>
<td class="name">{{.Target}}{{if .StandIn}} <span class="standin">stand-in</span>{{end}}</td><td><code>{{.Format}}</code></td><td class="tools">{{.Runtime}}</td><td class="n">{{.Size}}</td>
<td class="n">{{.Quality}}</td><td class="n">{{.Drop}}</td><td class="n">{{.P50}}</td><td class="n">{{.P95}}</td><td class="n">{{.P99}}</td><td class="n">{{.Throughput}}</td>
<td class="n">{{.PeakRSS}}</td><td class="n">{{.Growth}}</td><td>{{if .Failed}}<span class="fail">{{.Verdict}}</span>{{else}}{{.Verdict}}{{end}}</td>
</tr>
{{- end}}
</tbody>
</table>
</div>
{{- end}}
{{- range .Targets}}
{{- if or .Bench .Chart .Error .Manifest .Notes .Rejected .StepLogs}}
<h2>{{.Name}}: <code>{{.Format}}</code> for {{.Device}}{{if .Earlier}} <span class="note">(earlier run)</span>{{end}}</h2>
{{- if .Earlier}}
<p class="note">Published by an earlier run{{if .EarlierAt}} on {{.EarlierAt}}{{end}}; this run did not build it, and its folder is still in the output folder.</p>
{{- end}}
{{- if .Manifest}}
<p>Files: <a href="{{.Manifest}}">manifest.json</a>{{if .Logs}}; logs: {{range $i, $l := .Logs}}{{if $i}}, {{end}}<a class="id" href="{{$l}}">{{base $l}}</a>{{end}}{{end}}.</p>
{{- end}}
{{- if .Error}}
<p class="fail">{{line .Error}}</p>
{{- end}}
{{- if .Rejected}}
<p>Rejected model{{if .Size}} ({{.Size}}){{end}}, kept in the cache: <code>{{.Rejected}}</code></p>
{{- end}}
{{- if .StepLogs}}
<p>Logs:</p>
<ul>
{{- range .StepLogs}}
<li><span class="id">{{.Step}}</span>: <code>{{.Path}}</code></li>
{{- end}}
</ul>
{{- end}}
{{- if .Notes}}
<p>Notes from the steps:</p>
<ul>
{{- range .Notes}}
<li><span class="id">{{.Step}}</span>: {{line .Text}}</li>
{{- end}}
</ul>
{{- end}}
{{- with .Bench}}
<p>Measured on this host ({{.Host}}) with {{.Backend}}, {{.Threads}} threads: {{.WarmupRuns}} warm-up and {{.TimedRuns}} timed runs; each decodes one token with {{.PromptTokens}} tokens in the KV cache, and the first token is the median forward pass of a {{.PromptTokens}}-token prompt.</p>
<table>
<thead><tr><th>Decode tok/s</th><th>Token p50</th><th>p95</th><th>p99</th><th>First token</th><th>Prompt tok/s</th><th>Host bandwidth</th><th>Host ceiling</th><th>Efficiency</th></tr></thead>
<tbody><tr>
<td class="n">{{toks .DecodeTokS}}</td><td class="n">{{f2 .TokenP50MS}} ms</td><td class="n">{{f2 .TokenP95MS}} ms</td><td class="n">{{f2 .TokenP99MS}} ms</td>
<td class="n">{{f .FirstTokenMS}} ms</td><td class="n">{{toks .PromptTokS}}</td>
<td class="n">{{if .HostBandwidthGBs}}{{f2 (deref .HostBandwidthGBs)}} GB/s{{else}}-{{end}}</td>
<td class="n">{{if .HostCeilingTokS}}{{toks (deref .HostCeilingTokS)}} tok/s{{else}}-{{end}}</td>
<td class="n">{{if .Efficiency}}{{pct (deref .Efficiency)}}{{else}}-{{end}}</td>
</tr></tbody>
</table>
{{- end}}
{{- if .BenchStandIn}}
<p><span class="standin">The bench ran with a stand-in tool: its timings are not measurements of this model.</span></p>
{{- end}}
{{- with .Chart}}
<figure>
<svg xmlns="http://www.w3.org/2000/svg" width="{{f .Width}}" height="{{f .Height}}" viewBox="0 0 {{f .Width}} {{f .Height}}" role="img" aria-label="{{.Title}}" font-family="system-ui, sans-serif" font-size="11" fill="#1b1f24">
<title>{{.Title}}</title>
{{- $c := .}}
{{- range .Ticks}}
<line stroke="#d0d7de" x1="{{f .X}}" y1="{{f $c.PlotTop}}" x2="{{f .X}}" y2="{{f $c.PlotBottom}}"/>
<text x="{{f .X}}" y="{{f $c.PlotBottom}}" dy="14" text-anchor="middle">{{.Label}}</text>
{{- end}}
{{- range .Rows}}
<g>
<title>{{.Tooltip}}: {{.Value}} tok/s</title>
<text x="{{f (minus $c.BarX 6)}}" y="{{f .LabelY}}" text-anchor="end">{{.Label}}</text>
<rect fill="{{.Fill}}" x="{{f $c.BarX}}" y="{{f .BarY}}" width="{{f .CeilW}}" height="{{f .BarH}}"/>
{{- if .Measured}}
<rect fill="#d63384" x="{{f $c.BarX}}" y="{{f .MeasY}}" width="{{f .MeasW}}" height="{{f .MeasH}}"/>
{{- end}}
<text x="{{f .ValueX}}" y="{{f .LabelY}}">{{.Value}}</text>
</g>
{{- end}}
</svg>
<figcaption class="note">Decode ceiling = memory bandwidth / artifact size (every token reads every weight once), tok/s on a log scale; darker: the target's device{{if $c.Rows}}{{if (index $c.Rows 0).Host}}; grey with a pink bar: this host's ceiling from its measured bandwidth and the decode rate the bench measured{{end}}{{end}}.</figcaption>
</figure>
{{- end}}
{{- end}}
{{- end}}
{{- if .Failures}}
<h2>Failures</h2>
<ul>
{{- range .Failures}}
<li>{{if .Subject}}<strong>{{if .Step}}step {{end}}{{.Subject}}</strong>: {{end}}{{line .Message}}
{{- if .LogTail}}
<details><summary>last lines of {{.LogName}}</summary>
<pre>{{range .LogTail}}{{line .}}
{{end}}</pre>
</details>
{{- end}}
</li>
{{- end}}
</ul>
{{- end}}
<p class="note">Written by edgepipe. Sizes in binary units; bandwidths in GB/s (10<sup>9</sup> bytes). Paths in code, not links, are on the machine that ran, relative to the folder the run started in where they are inside it.</p>
</body>
</html>
`
