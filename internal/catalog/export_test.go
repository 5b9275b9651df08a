package catalog

// Exported for the external tests, which need the families registered.
var (
	FixFor       = fixFor
	ParseDevices = parseDevices
	DevicesYAML  = devicesYAML
	CheckQNNSoC  = checkQNNSoC
)
