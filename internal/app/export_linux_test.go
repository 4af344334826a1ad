package app

import "fmt"

// ResidentBinaryKiB is how much of the process's binary's read-only
// mappings is resident (binaryMappings), for tests.
func ResidentBinaryKiB() (int, error) {
	mappings, err := binaryMappings()
	if err != nil {
		return 0, err
	}
	kib := 0
	for _, m := range mappings {
		if m.residentKiB < 0 {
			return 0, fmt.Errorf("unreadable Rss of the mapping at %#x", m.lo)
		}
		kib += m.residentKiB
	}
	return kib, nil
}
