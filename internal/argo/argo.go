// Package argo turns a plan into an Argo Workflows Workflow: one DAG task
// per step, each running `edgepipe step run BUNDLE STEP` in a pod, the
// steps sharing outputs only through the remote cache.
//
// The bundle (plan, recipe, lock: see `edgepipe plan --bundle`) travels
// inside the Workflow itself, as a raw artifact in the workflow's
// arguments that the DAG hands to every task: one object to submit, no
// ConfigMap to create first and garbage-collect after, and no artifact
// repository needed to start. Raw artifacts are text, so the bundle is
// base64 text (`step run` reads either form); a Workflow is stored in
// etcd, so Export refuses a bundle over MaxBundleBytes.
package argo

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"go.yaml.in/yaml/v3"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/steps"
)

// MaxBundleBytes bounds the bundle shipped inside the Workflow: Kubernetes
// objects live in etcd (1.5 MiB a value by default) and Argo keeps the
// workflow's status in the same object.
const MaxBundleBytes = 512 << 10

// Paths inside each step's pod.
const (
	BundlePath = "/edgepipe/plan.bundle"
	CachePath  = "/edgepipe/cache"
	OutPath    = "/edgepipe/out"
)

// GPU placement: the resource NVIDIA's device plugin advertises and the
// label its GPU feature discovery puts on GPU nodes; DeviceLabel is the
// label a team puts on the nodes that are a catalog device (a Jetson),
// where engines for that device are built.
const (
	GPUResource = "nvidia.com/gpu"
	GPULabel    = "nvidia.com/gpu.present"
	DeviceLabel = "edgepipe.dev/device"
)

// Step is one step as the export needs it.
type Step struct {
	ID, Kind, Target string
	Needs            []string
	// MemoryMB and Cores are the step's weight (engine.Predict): the
	// pod's requests.
	MemoryMB int64
	Cores    int
	Host     steps.HostNeeds
	// Network: failures may be transient (a download); retried on any
	// failure, not only on the pod's loss.
	Network bool
	// Publish: the target's gate and publish (no kind of its own).
	Publish bool
}

// Options are an export's inputs.
type Options struct {
	Recipe      string // the recipe's name
	Image       string // an image with edgepipe on PATH and the toolchains the steps need
	RemoteCache string
	// Secret is a Secret whose keys become every pod's environment: the
	// remote cache's credentials (AWS_ACCESS_KEY_ID, ...), a signing key.
	// Optional: pods start without it.
	Secret string
	Bundle []byte
	Steps  []Step
}

// secretName is a Kubernetes Secret's name: a DNS-1123 subdomain.
var secretName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Check refuses an image that is not a container image reference and a
// Secret name Kubernetes would refuse: the Workflow would be written, and
// fail only once submitted (or pull some other image).
func (o Options) Check() error {
	if _, err := reference.ParseNormalizedNamed(o.Image); err != nil {
		return fmt.Errorf("--image %q is not a container image reference (%v): give one such as registry.example.com/team/edgepipe:v1, or edgepipe@sha256:DIGEST", o.Image, err)
	}
	if o.Secret != "" && (len(o.Secret) > 253 || !secretName.MatchString(o.Secret)) {
		return fmt.Errorf("--secret %q is not a Kubernetes Secret name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters (e.g. edgepipe-remote-cache)", o.Secret)
	}
	return nil
}

// entrypoint names the DAG template; no step's template takes it.
const entrypoint = "edgepipe"

// Export writes the Workflow as YAML.
func Export(o Options) ([]byte, error) {
	if o.Image == "" || o.RemoteCache == "" {
		return nil, fmt.Errorf("an Argo export needs an image and a remote cache")
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	armored := Armor(o.Bundle)
	if len(armored) > MaxBundleBytes {
		return nil, fmt.Errorf("the plan bundle is %d bytes as base64, over the %d that fit inside a Workflow: make the recipe's data files resolvable from the remote cache (digests) instead of shipping them", len(armored), MaxBundleBytes)
	}
	names := taskNames(o.Steps)
	dag := template{Name: entrypoint,
		Inputs: &ioSpec{Artifacts: []artifact{{Name: "bundle"}}},
		DAG:    &dagTemplate{}}
	tmpls := []template{}
	for _, s := range o.Steps {
		task := dagTask{Name: names[s.ID], Template: names[s.ID],
			Arguments: &arguments{Artifacts: []artifact{{Name: "bundle", From: "{{inputs.artifacts.bundle}}"}}}}
		for _, n := range s.Needs {
			task.Dependencies = append(task.Dependencies, names[n])
		}
		dag.DAG.Tasks = append(dag.DAG.Tasks, task)
		tmpls = append(tmpls, stepTemplate(o, s, names[s.ID]))
	}
	sum := sha256.Sum256(o.Bundle)
	wf := workflow{
		APIVersion: "argoproj.io/v1alpha1",
		Kind:       "Workflow",
		Metadata: metadata{
			GenerateName: dnsName("edgepipe-"+o.Recipe, 50) + "-",
			Labels:       map[string]string{"app.kubernetes.io/name": "edgepipe", "edgepipe.dev/recipe": labelValue(o.Recipe)},
			Annotations:  map[string]string{"edgepipe.dev/bundle-sha256": hex.EncodeToString(sum[:])},
		},
		Spec: spec{
			Entrypoint: entrypoint,
			Arguments: arguments{
				Parameters: []parameter{{Name: "remote-cache", Value: o.RemoteCache}},
				Artifacts:  []artifact{{Name: "bundle", Raw: &raw{Data: armored}}},
			},
			Volumes:   []volume{{Name: "cache", EmptyDir: &struct{}{}}},
			Templates: append([]template{dag}, tmpls...),
		},
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Argo Workflow for the edgepipe recipe %q: %d steps, one pod each, sharing\n", o.Recipe, len(o.Steps))
	fmt.Fprintf(&buf, "# outputs through the remote cache. Submit: argo submit THIS.yaml [-p remote-cache=URL]\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(wf); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// stepTemplate is one step's pod: `edgepipe step run` with the step's
// weight as requests, GPU placement, and retries.
func stepTemplate(o Options, s Step, name string) template {
	cores := strconv.Itoa(max(s.Cores, 1))
	args := []string{"step", "run", BundlePath, s.ID, "-j", cores,
		"--remote-cache", "{{workflow.parameters.remote-cache}}", "--remote-cache-mode", "readwrite", "--json"}
	t := template{Name: name,
		Metadata: &metadata{Annotations: map[string]string{"edgepipe.dev/step": s.ID}},
		Inputs:   &ioSpec{Artifacts: []artifact{{Name: "bundle", Path: BundlePath}}},
		Container: &container{Image: o.Image, Command: []string{"edgepipe"},
			Env:          []envVar{{Name: "EDGEPIPE_CACHE", Value: CachePath}},
			VolumeMounts: []volumeMount{{Name: "cache", MountPath: CachePath}},
		},
	}
	if o.Secret != "" {
		t.Container.EnvFrom = []envFrom{{SecretRef: &secretRef{Name: o.Secret, Optional: true}}}
	}
	if s.Publish {
		// The target's gate and publish: what it needs comes from the
		// remote cache; the verified folder is the task's output.
		args = []string{"step", "run", BundlePath, s.ID, "--out", OutPath,
			"--remote-cache", "{{workflow.parameters.remote-cache}}", "--remote-cache-mode", "read", "--json"}
		t.Outputs = &ioSpec{Artifacts: []artifact{{Name: "published", Path: OutPath + "/" + s.Target}}}
		t.Container.Resources.Requests = map[string]string{"cpu": "1", "memory": "512Mi"}
	} else {
		t.Container.Resources.Requests = map[string]string{
			"cpu":    cores,
			"memory": strconv.FormatInt(max(s.MemoryMB, 256), 10) + "Mi",
		}
	}
	t.Container.Args = args
	if s.Host.NvidiaGPU {
		t.Container.Resources.Limits = map[string]string{GPUResource: "1"}
		t.NodeSelector = map[string]string{GPULabel: "true"}
		t.Tolerations = []toleration{{Key: GPUResource, Operator: "Exists", Effect: "NoSchedule"}}
	}
	if s.Host.Device != "" {
		if t.NodeSelector == nil {
			t.NodeSelector = map[string]string{}
		}
		t.NodeSelector[DeviceLabel] = labelValue(s.Host.Device)
	}
	// A pod lost with its node, evicted or deleted is an error, not a
	// failure: retried. A step that failed is not, unless it downloads.
	t.RetryStrategy = &retryStrategy{Limit: "2", RetryPolicy: "OnError",
		Backoff: &backoff{Duration: "30s", Factor: "2"}}
	if s.Network {
		t.RetryStrategy.Limit, t.RetryStrategy.RetryPolicy = "3", "Always"
	}
	return t
}

// Armor is the bundle as a raw artifact carries it: gzip (a tar is mostly
// padding), then base64 lines.
func Armor(b []byte) string {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	enc := base64.StdEncoding.EncodeToString(z.Bytes())
	var sb strings.Builder
	for len(enc) > 76 {
		sb.WriteString(enc[:76])
		sb.WriteByte('\n')
		enc = enc[76:]
	}
	sb.WriteString(enc)
	sb.WriteByte('\n')
	return sb.String()
}

// maxDearmored bounds what armor may inflate to (a gzip bomb).
const maxDearmored = 64 << 20

// Dearmor reverses Armor; ok is false when b is not armor (a bundle as
// `plan --bundle` wrote it, a plan).
func Dearmor(b []byte) (out []byte, ok bool) {
	clean := bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, b)
	z, err := base64.StdEncoding.DecodeString(string(clean))
	if err != nil || len(z) == 0 {
		return nil, false
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, false
	}
	out, err = io.ReadAll(io.LimitReader(zr, maxDearmored+1))
	if err != nil || len(out) > maxDearmored {
		return nil, false
	}
	return out, true
}

var notName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// taskNames gives each step a unique Argo task name: alphanumerics and
// dashes, at most 63 characters (Argo allows 128; pod names are built
// from them), with a digest suffix when shortening or a clash needs one.
func taskNames(ss []Step) map[string]string {
	used := map[string]bool{entrypoint: true}
	out := map[string]string{}
	ids := make([]string, 0, len(ss))
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := strings.ToLower(strings.Trim(notName.ReplaceAllString(id, "-"), "-"))
		if n == "" || len(n) > 63 || used[n] {
			sum := sha256.Sum256([]byte(id))
			n = strings.Trim(n[:min(len(n), 54)], "-") + "-" + hex.EncodeToString(sum[:])[:8]
			n = strings.TrimLeft(n, "-")
		}
		used[n] = true
		out[id] = n
	}
	return out
}

// dnsName is s as a lowercase DNS label of at most n characters.
func dnsName(s string, n int) string {
	d := strings.Trim(notName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(d) > n {
		d = strings.TrimRight(d[:n], "-")
	}
	return d
}

var notLabel = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// labelValue is s as a Kubernetes label value (63 characters, starting
// and ending alphanumeric).
func labelValue(s string) string {
	v := notLabel.ReplaceAllString(s, "-")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-._")
}

// DearmorFile turns a bundle shipped as text (Armor: what an Argo raw
// artifact writes into a pod) back into a bundle file next to it and
// returns that path; any other file is returned as is.
func DearmorFile(path string) (string, error) {
	b, err := boundedfile.Read(path, 2*MaxBundleBytes)
	if err != nil || len(b) == 0 || b[0] == '{' {
		return path, nil // not armor: the caller reads it and says what is wrong
	}
	raw, ok := Dearmor(b)
	if !ok || len(raw) < 265 || !bytes.HasPrefix(raw[257:], []byte("ustar")) {
		return path, nil
	}
	f, err := os.CreateTemp("", "edgepipe-bundle-*.tar")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}
