//go:build !darwin

package messages

// hostMacOSVersion is "" away from a Mac: the version is unknown (the tests'
// stand-in Messages sets Config.MacOSVersion).
func hostMacOSVersion() string { return "" }
