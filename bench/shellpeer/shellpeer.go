// Package shellpeer writes the peer of demo-overhead: the tool commands
// of an edgepipe run as a plain sh script, each step timed, with the cache
// paths moved so the script makes its own outputs.
package shellpeer

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

var (
	// edgepipe runs a step with its outputs in <cache>/tmp/<key>.<pid>.<n>
	// and renames that to <cache>/objects/<key> when the step succeeds.
	tmpOutPath = regexp.MustCompile(`/tmp/([0-9a-f]{64})\.[0-9]+\.[0-9]+`)
	objectPath = regexp.MustCompile(`/objects/([0-9a-f]{64})`)
)

// Script writes the steps' commands as a plain sh script. Each step's
// cache paths are moved under peer/<key>, so the script writes its own
// outputs and reads those of its earlier steps; inputs that no step of the
// script produced (the fetched model) are read where edgepipe keeps them.
//
// Each step's commands are timed into peer/times.txt (step id, nanoseconds).
// passive exports OMP_WAIT_POLICY=PASSIVE for every step, the wait policy
// edgepipe gives its torch steps (steps.ThreadEnv); its llama.cpp steps
// keep OpenMP's default since efab730, so passive now shows what PASSIVE
// costs those, not an environment equal to edgepipe's.
func Script(steps []manifest.Step, peer string, passive bool) (string, error) {
	produced := map[string]bool{}
	for _, s := range steps {
		if s.CacheKey != "" {
			produced[s.CacheKey] = true
		}
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# The tool commands of an edgepipe run, in sequence (written by the benchmark).\nset -e\n")
	if passive {
		b.WriteString("export OMP_WAIT_POLICY=PASSIVE\n")
	}
	fmt.Fprintf(&b, "rm -rf %s\nmkdir -p %s\n", shQuote(peer), shQuote(filepath.Join(peer, "logs")))
	times := shQuote(filepath.Join(peer, TimesFile))
	for key := range produced {
		fmt.Fprintf(&b, "mkdir -p %s\n", shQuote(filepath.Join(peer, key)))
	}
	for _, s := range steps {
		if len(s.Argv) == 0 {
			continue
		}
		logFile := filepath.Join(peer, "logs", strings.NewReplacer(":", "_", "/", "_").Replace(s.ID)+".log")
		b.WriteString("t0=$(date +%s%N)\n")
		for _, argv := range s.Argv {
			var words []string
			for _, a := range argv {
				words = append(words, shQuote(rewriteCachePath(a, peer, produced)))
			}
			fmt.Fprintf(&b, "%s >>%s 2>&1\n", strings.Join(words, " "), shQuote(logFile))
		}
		fmt.Fprintf(&b, "echo %s $(($(date +%%s%%N) - t0)) >>%s\n", shQuote(s.ID), times)
	}
	return b.String(), nil
}

// rewriteCachePath maps a step's cache output folder, temporary or final,
// to peer/<key>. The path starts at the argument's start or after an '='
// (--flag=PATH).
func rewriteCachePath(arg, peer string, produced map[string]bool) string {
	start := strings.LastIndexByte(arg, '=') + 1
	path := arg[start:]
	if m := tmpOutPath.FindStringSubmatchIndex(path); m != nil {
		return arg[:start] + filepath.Join(peer, path[m[2]:m[3]]) + path[m[1]:]
	}
	if m := objectPath.FindStringSubmatchIndex(path); m != nil && produced[path[m[2]:m[3]]] {
		return arg[:start] + filepath.Join(peer, path[m[2]:m[3]]) + path[m[1]:]
	}
	return arg
}

func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TimesFile is where the shell peer writes each step's time.
const TimesFile = "times.txt"

// ReadTimes reads the shell peer's "STEP NANOSECONDS" lines, in seconds.
func ReadTimes(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the shell peer's step times: %w", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		id, ns, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: a line that is not STEP NANOSECONDS: %q", path, line)
		}
		out[id] += float64(n) / 1e9
	}
	return out, nil
}

// PublishedSteps collects the steps that ran tools from every manifest
// under out, each once, in an order that runs every step after the steps
// it needs: each manifest lists its target's steps in dependency order, so
// the first appearance of a step comes after all of its own inputs.
func PublishedSteps(out string) ([]manifest.Step, error) {
	dirs, err := filepath.Glob(filepath.Join(out, "*", manifest.FileName))
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no manifests under %s after the run", out)
	}
	slices.Sort(dirs)
	var steps []manifest.Step
	seen := map[string]bool{}
	for _, p := range dirs {
		m, err := manifest.Read(filepath.Dir(p))
		if err != nil {
			return nil, err
		}
		for _, s := range m.Steps {
			if len(s.Argv) == 0 || seen[s.ID] {
				continue
			}
			seen[s.ID] = true
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("the manifests under %s record no tool commands", out)
	}
	return steps, nil
}
