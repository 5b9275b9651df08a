package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/tools"

	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/steps"
)

// newInvocationID names one run in provenance when the caller gave none.
func newInvocationID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40 // a version 4 UUID
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return "urn:uuid:" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// provenanceDeps lists what the target's steps read that the manifest does
// not record: the data files (evaluation, calibration) with their digests,
// and tools found outside the pinned toolchains.
func (e *Engine) provenanceDeps(ctx context.Context, s *plan.Step) []provenance.ResourceDescriptor {
	var deps []provenance.ResourceDescriptor
	seen := map[string]bool{}
	add := func(key string, d provenance.ResourceDescriptor) {
		if !seen[key] {
			seen[key] = true
			deps = append(deps, d)
		}
	}
	for _, st := range e.upstream(s) {
		roles := make([]string, 0, len(st.Data))
		for role := range st.Data {
			roles = append(roles, role)
		}
		sort.Strings(roles)
		for _, role := range roles {
			ref := st.Data[role]
			p, err := e.opt.Data(ref)
			if err != nil {
				continue // the step that read it would have failed
			}
			fd, err := e.opt.Cache.Memo().File(p)
			if err != nil {
				continue
			}
			add("data "+role+" "+ref, provenance.DataFile(role, ref, fd.SHA256))
		}
		for _, t := range e.toolsOf(ctx, st) {
			if strings.HasPrefix(t.Origin, "toolchain ") {
				continue // the manifest's toolchains describe it
			}
			add("tool "+t.Name, provenance.Tool(t.Name, t.Identity, t.Version, t.Origin))
		}
	}
	return deps
}

// toolsOf returns the tools a step ran or was cached with. Only a step
// this engine never looked at (a transitive need under `step run`) has no
// output; its key would hold the same identities, so resolving them
// (answered from the resolver's memo) names the same tools.
func (e *Engine) toolsOf(ctx context.Context, st *plan.Step) []*tools.Tool {
	if out := e.output(st.ID); out != nil && len(out.Tools) > 0 {
		return out.Tools
	}
	k, ok := steps.Lookup(st.Kind)
	if !ok {
		return nil
	}
	var tools []*tools.Tool
	for _, name := range k.Tools(st.Params) {
		if t, err := e.opt.Tools.Resolve(ctx, name); err == nil {
			tools = append(tools, t)
		}
	}
	return tools
}
