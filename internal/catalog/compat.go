package catalog

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/suggest"
)

// CanRun reports whether deviceID has a runtime that loads format. When it
// does not, fix is a sentence naming what to use instead and why, e.g.
// "use mlc-q4f16_1: WebLLM loads MLC q4f16_1 or q4f32_1 weights, not GGUF".
func CanRun(deviceID, format string) (ok bool, fix string) {
	d, found := Lookup(deviceID)
	if !found {
		return false, unknownDeviceMessage(deviceID)
	}
	f, err := ParseFormat(format)
	if err != nil {
		return false, err.Error()
	}
	if d.Runs(f.Name) {
		return true, ""
	}
	return false, fixFor(d, f)
}

func unknownDeviceMessage(id string) string {
	msg := fmt.Sprintf("unknown device %q", id)
	if hint := suggest.Closest(id, allDeviceNames()); hint != "" {
		msg += fmt.Sprintf("; did you mean %q?", hint)
	}
	return msg + " Run `edgepipe devices` for the list."
}

// devicesRunning lists the devices some runtime of which loads format.
func devicesRunning(format string) []string {
	var ids []string
	for _, d := range Devices() {
		if d.Runs(format) {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

// fixFor suggests a format of the same family when the device runs one
// (closest to what the recipe asked for), else the device's preferred format.
func fixFor(d Device, want Format) string {
	if want.TensorCore != "" && !d.HasTensorCore(want.TensorCore) {
		return fmt.Sprintf("use %s: %s's GPU has no %s tensor cores (tensor cores: %s), so %s does not run there; devices that run it: %s",
			d.PreferredFormat, d.ID, strings.ToUpper(want.TensorCore), strings.Join(d.TensorCores, ", "), want.Name,
			strings.Join(devicesRunning(want.Name), ", "))
	}
	alt := d.PreferredFormat
	for _, f := range Formats() {
		if f.Family == want.Family && d.Runs(f.Name) {
			alt = f.Name
			break
		}
	}
	rt := runtimeByName(d, d.RuntimeFor(alt))
	if len(d.Runtimes) == 1 {
		return fmt.Sprintf("use %s: %s loads %s, not %s", alt, rt.Name, rt.Loads, want.Label())
	}
	names := make([]string, len(d.Runtimes))
	for i, r := range d.Runtimes {
		names[i] = r.Name
	}
	return fmt.Sprintf("use %s: no runtime on %s (%s) loads %s; %s loads %s",
		alt, d.ID, strings.Join(names, ", "), want.Name, rt.Name, rt.Loads)
}

func runtimeByName(d Device, name string) Runtime {
	for _, r := range d.Runtimes {
		if r.Name == name {
			return r
		}
	}
	return Runtime{}
}

// Catalog adapts the package functions to what recipe validation asks of
// the device catalog (plan.Catalog adds the families' options).
type Catalog struct{}

func (Catalog) DeviceIDs() []string { return DeviceIDs() }

func (Catalog) HasDevice(id string) bool {
	_, ok := Lookup(id)
	return ok
}

func (Catalog) FormatNames() []string { return FormatNames() }

func (Catalog) ValidFormat(name string) bool {
	_, err := ParseFormat(name)
	return err == nil
}

func (Catalog) CanRun(deviceID, format string) (ok bool, fix string) {
	return CanRun(deviceID, format)
}

// KVFix says why a device cannot hold its KV cache in kv for a format, and
// what to write instead, or "" when it can: an FP8 KV cache in an NVIDIA
// engine needs FP8 tensor cores, which Ampere (every Orin, the A100) lacks.
func KVFix(deviceID, format, kv string) string {
	d, ok := Lookup(deviceID)
	f, err := ParseFormat(format)
	if !ok || err != nil || !f.NeedsNVIDIAGPU {
		return ""
	}
	switch {
	case kv == "fp8" && !d.HasTensorCore("fp8"):
		return fmt.Sprintf("%s's GPU has no FP8 tensor cores (tensor cores: %s): write kv_dtype: f16, or q8 for an INT8 KV cache (trtllm-int4)", d.ID, strings.Join(d.TensorCores, ", "))
	case kv == "q4":
		return fmt.Sprintf("%s engines hold no 4-bit KV cache: write kv_dtype: f16, q8 (trtllm-int4) or fp8 (FP8 tensor cores)", f.Name)
	case kv == "q8" && f.Name == "nvfp4":
		return "an NVFP4 engine's KV cache is FP16 or FP8: write kv_dtype: f16 or fp8"
	}
	return ""
}

func (Catalog) KVFix(deviceID, format, kv string) string { return KVFix(deviceID, format, kv) }

func (Catalog) BenchBackend(format string) (string, bool) {
	f, err := ParseFormat(format)
	return f.Bench, err == nil && f.Bench != ""
}
