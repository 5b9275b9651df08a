package catalog

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/suggest"
)

// CanRun reports whether deviceID has a runtime that loads format. When it
// does not, fix is a sentence naming what to use instead and why, e.g.
// "use mlc-q4f16_1: WebLLM loads MLC q4f16_1 weights, not GGUF".
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

// fixFor suggests a format of the same family when the device runs one
// (closest to what the recipe asked for), else the device's preferred format.
func fixFor(d Device, want Format) string {
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

func (Catalog) BenchBackend(format string) (string, bool) {
	f, err := ParseFormat(format)
	return f.Bench, err == nil && f.Bench != ""
}
