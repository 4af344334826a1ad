package app

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseStartPages lets go of the pages of the process's own binary that
// it has touched so far in its read-only mappings (text, rodata, pclntab).
// The `make run` broker calls it once it is listening: at start its
// package inits (the AWS SDK's endpoint tables, encoding/gob for the Lambda
// RPC mode, the drivers', the catalog's), each with the kernel's 64 KB
// fault-around, left 18 MiB of the binary resident, most of which serving
// never touches again (docs/performance.md). The pages stay in the page
// cache; those that serving needs fault back in from there.
//
// MADV_DONTNEED on a private file mapping discards the process's own
// copies of its pages, so a mapping with any (its Anonymous pages: written,
// as a relocation would) is left alone: only clean file pages are let go.
func releaseStartPages() {
	mappings, err := binaryMappings()
	if err != nil {
		return
	}
	for _, m := range mappings {
		if m.anonymousKiB == 0 {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.lo), uintptr(m.hi-m.lo), syscall.MADV_DONTNEED)
		}
	}
}

// binaryMapping is a read-only mapping of the process's own binary: its
// address range, and how much of it is resident and how much of that the
// process wrote (its own anonymous copies), from /proc/self/smaps.
type binaryMapping struct {
	lo, hi                    uint64
	residentKiB, anonymousKiB int
}

// binaryMappings reads the process's read-only mappings of its own binary
// from /proc/self/smaps.
func binaryMappings() ([]binaryMapping, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mappings []binaryMapping
	var m *binaryMapping // the binary's mapping whose fields follow, if any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && !strings.HasSuffix(fields[0], ":"):
			// A mapping's header: range, perms, offset, device, inode, path.
			m = nil
			lo, hi, _ := strings.Cut(fields[0], "-")
			l, errLo := strconv.ParseUint(lo, 16, 64)
			h, errHi := strconv.ParseUint(hi, 16, 64)
			if len(fields) >= 6 && fields[5] == exe && !strings.Contains(fields[1], "w") && errLo == nil && errHi == nil {
				mappings = append(mappings, binaryMapping{lo: l, hi: h})
				m = &mappings[len(mappings)-1]
			}
		case m != nil && len(fields) >= 2 && (fields[0] == "Rss:" || fields[0] == "Anonymous:"):
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				n = -1 // unreadable: count it as written, so it is never let go
			}
			if fields[0] == "Rss:" {
				m.residentKiB = n
			} else {
				m.anonymousKiB = n
			}
		}
	}
	return mappings, sc.Err()
}
