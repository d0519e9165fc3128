package messages

import "golang.org/x/sys/unix"

// hostMacOSVersion is this Mac's macOS version ("15.1"), "" if unknown.
func hostMacOSVersion() string {
	v, err := unix.Sysctl("kern.osproductversion")
	if err != nil {
		return ""
	}
	return v
}
