// Package provenance writes and checks the SLSA provenance of a published
// artifact folder: an in-toto Statement (v1) whose subjects are the folder's
// files and whose predicate (SLSA Provenance v1) says how edgepipe made them
// (provenance.intoto.json), optionally signed as a DSSE envelope inside a
// Sigstore bundle (provenance.sigstore.json) that sigstore-go and
// `cosign verify-blob-attestation` check with the signer's public key.
//
// docs/provenance.md documents the build type: what each parameter and
// dependency means.
package provenance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// The fixed strings of the formats written here.
const (
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://slsa.dev/provenance/v1"
	// BuildType names the shape of buildDefinition that edgepipe writes;
	// the page it points at documents it. A change that readers would
	// misread gets a new version.
	BuildType = "https://github.com/edgepipe/edgepipe/blob/main/docs/provenance.md#build-type-v1"
	// DefaultBuilderID identifies edgepipe as the builder when the run does
	// not say otherwise (EDGEPIPE_BUILDER_ID).
	DefaultBuilderID = "https://github.com/edgepipe/edgepipe/cmd/edgepipe"
)

// Statement is an in-toto Statement v1 with a SLSA Provenance v1 predicate.
type Statement struct {
	Type          string     `json:"_type"`
	Subject       []Subject  `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     Provenance `json:"predicate"`
}

// Subject is one artifact file: its path in the folder and its digest.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Provenance is the SLSA Provenance v1 predicate.
type Provenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition is what was built and from what.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   InternalParameters   `json:"internalParameters"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are what the user chose: the recipe and the target.
type ExternalParameters struct {
	Recipe RecipeParameter `json:"recipe"`
	Target TargetParameter `json:"target"`
}

// RecipeParameter is the recipe file, as given on the command line.
type RecipeParameter struct {
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// TargetParameter is the recipe target the folder is the artifact of.
type TargetParameter struct {
	Name    string `json:"name"`
	Device  string `json:"device"`
	Format  string `json:"format"`
	Context int    `json:"context,omitempty"`
	KVDtype string `json:"kvDtype,omitempty"`
}

// InternalParameters are what edgepipe itself brought: its version and the
// pinned toolchains.
type InternalParameters struct {
	EdgepipeVersion string                        `json:"edgepipeVersion"`
	Toolchains      map[string]ToolchainParameter `json:"toolchains,omitempty"`
}

// ToolchainParameter is one toolchain's lock digest and tool versions.
type ToolchainParameter struct {
	LockDigest string            `json:"lockDigest"`
	Versions   map[string]string `json:"versions,omitempty"`
}

// ResourceDescriptor is an in-toto ResourceDescriptor.
type ResourceDescriptor struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]any    `json:"annotations,omitempty"`
}

// RunDetails says who built it and when.
type RunDetails struct {
	Builder  Builder  `json:"builder"`
	Metadata Metadata `json:"metadata"`
}

// Builder identifies the build platform.
type Builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

// Metadata is the invocation's identity and times.
type Metadata struct {
	InvocationID string     `json:"invocationId,omitempty"`
	StartedOn    *time.Time `json:"startedOn,omitempty"`
	FinishedOn   *time.Time `json:"finishedOn,omitempty"`
}

// Run is what the caller knows about the invocation.
type Run struct {
	BuilderID    string
	InvocationID string
	StartedOn    time.Time
	FinishedOn   time.Time
}

// New builds the statement for the artifact folder dir from its manifest
// (already written there: its digest becomes a subject), the run, and the
// dependencies the manifest does not record (data files, tools outside
// toolchains), which the caller describes with DataFile and Tool.
func New(dir string, m *manifest.Manifest, run Run, extra []ResourceDescriptor) (*Statement, error) {
	b, err := boundedfile.Read(filepath.Join(dir, manifest.FileName), boundedfile.ManifestLimit)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	sum := sha256.Sum256(b)

	st := &Statement{Type: StatementType, PredicateType: PredicateType}
	for _, f := range m.Files {
		st.Subject = append(st.Subject, Subject{Name: f.Path, Digest: map[string]string{"sha256": f.SHA256}})
	}
	st.Subject = append(st.Subject, Subject{Name: manifest.FileName, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
	sort.Slice(st.Subject, func(i, j int) bool { return st.Subject[i].Name < st.Subject[j].Name })

	bd := &st.Predicate.BuildDefinition
	bd.BuildType = BuildType
	bd.ExternalParameters = ExternalParameters{
		Recipe: RecipeParameter{Name: m.Recipe.Name, Path: m.Recipe.Path, SHA256: m.Recipe.SHA256},
		Target: TargetParameter{Name: m.Target.Name, Device: m.Target.Device, Format: m.Target.Format,
			Context: m.Target.Context, KVDtype: m.Target.KVDtype},
	}
	bd.InternalParameters.EdgepipeVersion = m.EdgepipeVersion
	bd.ResolvedDependencies = append(bd.ResolvedDependencies, sourceDependencies(m.Source)...)
	names := make([]string, 0, len(m.Toolchains))
	for name := range m.Toolchains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tc := m.Toolchains[name]
		if bd.InternalParameters.Toolchains == nil {
			bd.InternalParameters.Toolchains = map[string]ToolchainParameter{}
		}
		bd.InternalParameters.Toolchains[name] = ToolchainParameter{LockDigest: tc.LockDigest, Versions: tc.Versions}
		bd.ResolvedDependencies = append(bd.ResolvedDependencies, toolchainDependency(name, tc))
	}
	bd.ResolvedDependencies = append(bd.ResolvedDependencies, extra...)

	builder := run.BuilderID
	if builder == "" {
		builder = DefaultBuilderID
	}
	st.Predicate.RunDetails = RunDetails{
		Builder:  Builder{ID: builder, Version: map[string]string{"edgepipe": m.EdgepipeVersion}},
		Metadata: Metadata{InvocationID: run.InvocationID, StartedOn: utc(run.StartedOn), FinishedOn: utc(run.FinishedOn)},
	}
	return st, nil
}

func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Second)
	return &u
}

var gitCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// sourceDependencies describes the source as one descriptor (its URI and,
// for revisioned sources, the commit it resolved to) and one per file.
func sourceDependencies(s manifest.Source) []ResourceDescriptor {
	src := ResourceDescriptor{Name: "source", URI: s.URI}
	if s.ResolvedRevision != "" {
		if gitCommit.MatchString(s.ResolvedRevision) {
			src.Digest = map[string]string{"gitCommit": s.ResolvedRevision}
		}
		src.Annotations = map[string]any{"resolvedRevision": s.ResolvedRevision}
	}
	out := []ResourceDescriptor{src}
	for _, f := range s.Files {
		out = append(out, ResourceDescriptor{Name: "source/" + f.Path, Digest: map[string]string{"sha256": f.SHA256},
			Annotations: map[string]any{"size": f.Size}})
	}
	return out
}

// toolchainDependency describes a pinned toolchain by its lock digest. An
// identity can chain digests ("sha256:LOCK+sha256:PYTHON+sha256:SCRIPT"):
// the first is the toolchain's own lock; the whole string is kept.
func toolchainDependency(name string, tc manifest.Toolchain) ResourceDescriptor {
	d := ResourceDescriptor{Name: "toolchain/" + name, Annotations: map[string]any{"identity": tc.LockDigest}}
	if len(tc.Versions) > 0 {
		d.Annotations["versions"] = tc.Versions
	}
	if hex, ok := sha256Of(tc.LockDigest); ok {
		d.Digest = map[string]string{"sha256": hex}
	} else {
		d.URI = "edgepipe:toolchain/" + name
	}
	return d
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// sha256Of returns the hex of the first "sha256:HEX" in an identity.
func sha256Of(identity string) (string, bool) {
	first, _, _ := strings.Cut(identity, "+")
	hex, ok := strings.CutPrefix(first, "sha256:")
	if !ok || !sha256Hex.MatchString(hex) {
		return "", false
	}
	return hex, true
}

// DataFile describes a data file a step read (the evaluation or
// calibration text): its role, the reference the recipe wrote
// (builtin:NAME or a path) and its digest.
func DataFile(role, ref, sha256 string) ResourceDescriptor {
	return ResourceDescriptor{Name: "data/" + role, URI: ref, Digest: map[string]string{"sha256": sha256}}
}

// Tool describes a tool that did not come from a pinned toolchain (one the
// recipe or --tool-path pointed at): its name, identity ("sha256:HEX" of
// its bytes), version and where it was found.
func Tool(name, identity, version, origin string) ResourceDescriptor {
	d := ResourceDescriptor{Name: "tool/" + name, Annotations: map[string]any{"origin": origin}}
	if version != "" {
		d.Annotations["version"] = version
	}
	if hex, ok := sha256Of(identity); ok {
		d.Digest = map[string]string{"sha256": hex}
	} else {
		d.Annotations["identity"] = identity
		d.URI = "edgepipe:tool/" + name
	}
	return d
}

// BuilderIDEnv overrides runDetails.builder.id, for a CI system that
// vouches for its runs (its workflow's URI).
const BuilderIDEnv = "EDGEPIPE_BUILDER_ID"

// RunFromEnv describes the invocation from the environment: the builder id
// override, and in GitHub Actions the run's URL as the invocation id (what
// SLSA's GitHub build types use). Fields it cannot fill stay empty.
func RunFromEnv(getenv func(string) string) Run {
	r := Run{BuilderID: getenv(BuilderIDEnv)}
	if getenv("GITHUB_ACTIONS") == "true" {
		server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
		if server != "" && repo != "" && id != "" {
			r.InvocationID = server + "/" + repo + "/actions/runs/" + id
			if a := getenv("GITHUB_RUN_ATTEMPT"); a != "" {
				r.InvocationID += "/attempts/" + a
			}
		}
	}
	return r
}
