package app

import (
	"fmt"
	"os"
)

// ResidentBinaryKiB is how much of the process's binary's read-only
// mappings is resident (readOnlyMappings), for tests.
func ResidentBinaryKiB() (int, error) {
	mappings, err := readOnlyMappings("")
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

// TouchBinary reads every page of the process's binary's read-only
// mappings (through /proc/self/mem, which faults each in as a read
// would), so that all of them are resident, for tests that measure what
// the broker lets go of whatever ran before them.
func TouchBinary() error {
	mappings, err := readOnlyMappings("")
	if err != nil {
		return err
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return err
	}
	defer mem.Close()
	b := make([]byte, 1)
	for _, m := range mappings {
		for a := m.lo; a < m.hi; a += uint64(os.Getpagesize()) {
			if _, err := mem.ReadAt(b, int64(a)); err != nil {
				return fmt.Errorf("read %#x: %w", a, err)
			}
		}
	}
	return nil
}
