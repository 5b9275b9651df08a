package catalog

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Device is one target a recipe can name. The JSON form is what
// `edgepipe devices --json` prints.
type Device struct {
	ID                 string   `json:"id" yaml:"id"`
	Aliases            []string `json:"aliases,omitempty" yaml:"aliases"`
	Name               string   `json:"name" yaml:"name"`
	Family             string   `json:"family" yaml:"family"`     // apple-ane | qualcomm-hexagon | webgpu | nvidia-jetson | cpu | nvidia-gpu | intel-npu | amd-npu
	Platform           string   `json:"platform" yaml:"platform"` // ios | macos | android | browser | jetson | laptop | gpu-server
	MemoryBandwidthGBs float64  `json:"memory_bandwidth_gb_s" yaml:"memory_bandwidth_gb_s"`
	MemoryGB           float64  `json:"memory_gb" yaml:"memory_gb"`
	NPUTOPS            float64  `json:"npu_tops" yaml:"npu_tops"`
	OSReservedGB       float64  `json:"os_reserved_gb" yaml:"os_reserved_gb"`
	NeedsNVIDIAGPU     bool     `json:"needs_nvidia_gpu" yaml:"needs_nvidia_gpu"`
	// TensorCores are the element types an NVIDIA GPU's tensor cores
	// compute in (Ampere: fp16, int8; Hopper adds fp8; Blackwell fp4);
	// empty for other devices.
	TensorCores []string `json:"tensor_cores,omitempty" yaml:"tensor_cores"`
	// ShaderF16 says whether a WebGPU device's browser exposes the
	// shader-f16 feature (WebLLM needs it for q4f16_1; without it the
	// picker chooses q4f32_1); nil for devices that are not WebGPU.
	ShaderF16 *bool `json:"shader_f16,omitempty" yaml:"shader_f16"`
	// SoCModel and HTPArch are a Snapdragon's QNN SoC model id (the QNN
	// SDK's QnnTypes.h, QNN_SOC_MODEL_*) and its Hexagon HTP architecture
	// (v75 is 75): QNN's HTP backend compiles a context binary for exactly
	// these. 0 for devices without a Hexagon NPU.
	SoCModel int `json:"soc_model,omitempty" yaml:"soc_model"`
	HTPArch  int `json:"htp_arch,omitempty" yaml:"htp_arch"`
	// PreferredFormat is the format the domain brief's picker chooses for
	// this device; compatibility fixes suggest it.
	PreferredFormat string        `json:"preferred_format" yaml:"preferred_format"`
	Runtimes        []Runtime     `json:"runtimes" yaml:"runtimes"`
	Observed        []Observation `json:"observed,omitempty" yaml:"observed"`
	Notes           []string      `json:"notes,omitempty" yaml:"notes"`
	// Sources cites each number, keyed by its JSON field name.
	Sources map[string]string `json:"sources" yaml:"sources"`
}

// Runtime is an inference runtime on a device and the formats it loads.
type Runtime struct {
	Name string `json:"name" yaml:"name"`
	// Loads says what the runtime loads, in words for error messages.
	Loads string `json:"loads" yaml:"loads"`
	// Formats are format names; "gguf-*" stands for every gguf type.
	Formats []string `json:"formats" yaml:"formats"`
}

// Observation is a decode speed someone measured on the device.
type Observation struct {
	Model   string  `json:"model" yaml:"model"`
	ModelGB float64 `json:"model_gb" yaml:"model_gb"` // 0: no size the ceiling math can use
	TokS    float64 `json:"tok_s" yaml:"tok_s"`
	Note    string  `json:"note,omitempty" yaml:"note"`
	Source  string  `json:"source" yaml:"source"`
}

//go:embed devices.yaml
var devicesYAML []byte

// catalogData is parsed once; the embedded file is checked by the tests, so
// a failure here is a build defect, not a user error.
var catalogData = sync.OnceValue(func() *deviceTable {
	if len(Formats()) == 0 {
		panic("catalog: no format families are registered: import github.com/edgepipe/edgepipe/pipelines")
	}
	devs, err := parseDevices(devicesYAML)
	if err != nil {
		panic(fmt.Sprintf("catalog: embedded devices.yaml: %v", err))
	}
	return newDeviceTable(devs)
})

type deviceTable struct {
	devices []Device
	byName  map[string]int // ids and aliases
}

func newDeviceTable(devs []Device) *deviceTable {
	t := &deviceTable{devices: devs, byName: map[string]int{}}
	for i, d := range devs {
		t.byName[d.ID] = i
		for _, a := range d.Aliases {
			t.byName[a] = i
		}
	}
	return t
}

// Devices returns every device in catalog order. The result is a copy.
func Devices() []Device {
	devs := catalogData().devices
	out := make([]Device, len(devs))
	for i, d := range devs {
		out[i] = d.clone()
	}
	return out
}

// Lookup finds a device by id or alias.
func Lookup(id string) (Device, bool) {
	t := catalogData()
	i, ok := t.byName[id]
	if !ok {
		return Device{}, false
	}
	return t.devices[i].clone(), true
}

// DeviceIDs lists canonical device ids (not aliases) in catalog order.
func DeviceIDs() []string {
	devs := catalogData().devices
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.ID
	}
	return ids
}

// allDeviceNames is ids and aliases, for spelling suggestions.
func allDeviceNames() []string {
	var names []string
	for _, d := range catalogData().devices {
		names = append(names, d.ID)
		names = append(names, d.Aliases...)
	}
	return names
}

// Runs reports whether some runtime on the device loads format.
func (d Device) Runs(format string) bool { return d.RuntimeFor(format) != "" }

// HasTensorCore reports whether the device's GPU computes in typ; a device
// that lists no tensor cores is not an NVIDIA GPU and is not asked.
func (d Device) HasTensorCore(typ string) bool {
	return len(d.TensorCores) == 0 || slices.Contains(d.TensorCores, typ)
}

// RuntimeFor names the device's preferred runtime for format, or "" when
// none loads it.
func (d Device) RuntimeFor(format string) string {
	if _, err := ParseFormat(format); err != nil {
		return ""
	}
	for _, r := range d.Runtimes {
		for _, pattern := range r.Formats {
			if formatMatches(pattern, format) {
				return r.Name
			}
		}
	}
	return ""
}

func formatMatches(pattern, format string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(format, prefix)
	}
	return pattern == format
}

func (d Device) clone() Device {
	c := d
	c.Aliases = append([]string(nil), d.Aliases...)
	c.Runtimes = make([]Runtime, len(d.Runtimes))
	for i, r := range d.Runtimes {
		r.Formats = append([]string(nil), r.Formats...)
		c.Runtimes[i] = r
	}
	c.Observed = append([]Observation(nil), d.Observed...)
	c.Notes = append([]string(nil), d.Notes...)
	c.Sources = make(map[string]string, len(d.Sources))
	for k, v := range d.Sources {
		c.Sources[k] = v
	}
	return c
}

var (
	validFamilies  = []string{"apple-ane", "qualcomm-hexagon", "webgpu", "nvidia-jetson", "cpu", "nvidia-gpu", "intel-npu", "amd-npu"}
	validPlatforms = []string{"ios", "macos", "android", "browser", "jetson", "laptop", "gpu-server"}
	deviceIDPat    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// parseDevices decodes and checks a device list. Unknown fields are errors
// so a typo in the data file cannot silently drop a number.
func parseDevices(data []byte) ([]Device, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var devs []Device
	if err := dec.Decode(&devs); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if len(devs) == 0 {
		return nil, errors.New("no devices")
	}
	seen := map[string]string{}
	var errs []error
	for _, d := range devs {
		for _, name := range append([]string{d.ID}, d.Aliases...) {
			if prev, dup := seen[name]; dup {
				errs = append(errs, fmt.Errorf("device %q: name %q already used by %q", d.ID, name, prev))
			}
			seen[name] = d.ID
		}
		if err := checkDevice(d); err != nil {
			errs = append(errs, fmt.Errorf("device %q: %w", d.ID, err))
		}
	}
	return devs, errors.Join(errs...)
}

func checkDevice(d Device) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, name := range append([]string{d.ID}, d.Aliases...) {
		if !deviceIDPat.MatchString(name) {
			bad("id or alias %q must match %s", name, deviceIDPat)
		}
	}
	if d.Name == "" {
		bad("name is empty")
	}
	if !slices.Contains(validFamilies, d.Family) {
		bad("family %q is not one of %s", d.Family, strings.Join(validFamilies, ", "))
	}
	if !slices.Contains(validPlatforms, d.Platform) {
		bad("platform %q is not one of %s", d.Platform, strings.Join(validPlatforms, ", "))
	}
	if d.MemoryBandwidthGBs <= 0 || d.MemoryGB <= 0 {
		bad("memory_bandwidth_gb_s and memory_gb must be positive")
	}
	if d.NPUTOPS < 0 || d.OSReservedGB < 0 || d.OSReservedGB >= d.MemoryGB {
		bad("npu_tops must be >= 0 and os_reserved_gb in [0, memory_gb)")
	}
	if err := checkQNNSoC(d); err != nil {
		errs = append(errs, err)
	}
	for key, v := range map[string]float64{
		"memory_bandwidth_gb_s": d.MemoryBandwidthGBs,
		"memory_gb":             d.MemoryGB,
		"npu_tops":              d.NPUTOPS,
		"os_reserved_gb":        d.OSReservedGB,
		"soc_model":             float64(d.SoCModel),
		"htp_arch":              float64(d.HTPArch),
	} {
		if v != 0 && strings.TrimSpace(d.Sources[key]) == "" {
			bad("%s = %g has no entry in sources", key, v)
		}
	}
	if len(d.Runtimes) == 0 {
		bad("no runtimes")
	}
	for _, r := range d.Runtimes {
		if r.Name == "" || r.Loads == "" || len(r.Formats) == 0 {
			bad("runtime %q needs name, loads and formats", r.Name)
		}
		for _, p := range r.Formats {
			if !patternMatchesAny(p) {
				bad("runtime %q: %s", r.Name, unknownFormatMessage(p))
			}
		}
	}
	pref, err := ParseFormat(d.PreferredFormat)
	switch {
	case err != nil:
		bad("preferred_format: %v", err)
	case !d.Runs(pref.Name):
		bad("preferred_format %q is not loaded by any of its runtimes", pref.Name)
	case d.NeedsNVIDIAGPU != pref.NeedsNVIDIAGPU:
		bad("needs_nvidia_gpu = %v but its preferred format %s says %v", d.NeedsNVIDIAGPU, pref.Name, pref.NeedsNVIDIAGPU)
	}
	for _, o := range d.Observed {
		if o.Model == "" || o.TokS <= 0 || o.ModelGB < 0 || o.Source == "" {
			bad("observation %q needs a model, tok_s > 0, model_gb >= 0 and a source", o.Model)
		}
	}
	return errors.Join(errs...)
}

// checkQNNSoC: soc_model and htp_arch come together, on Hexagon devices.
func checkQNNSoC(d Device) error {
	if d.SoCModel == 0 && d.HTPArch == 0 {
		return nil
	}
	if d.Family != "qualcomm-hexagon" || d.SoCModel <= 0 || d.HTPArch < 68 {
		return errors.New("soc_model and htp_arch are for qualcomm-hexagon devices, both set (htp_arch 68 or newer)")
	}
	return nil
}

func patternMatchesAny(pattern string) bool {
	for _, f := range Formats() {
		if formatMatches(pattern, f.Name) {
			return true
		}
	}
	return false
}
