package app

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// releaseBinaryPages lets go of the pages of the process's own binary that
// it has touched so far in its read-only mappings (text, rodata, pclntab).
// The `make run` broker calls it once it is listening: at start its
// package inits (the AWS SDK's endpoint tables, encoding/gob for the Lambda
// RPC mode, the drivers', the catalog's), each with the kernel's 64 KB
// fault-around, left 18 MiB of the binary resident, most of which serving
// never touches again (docs/performance.md). The pages stay in the page
// cache; those that serving needs fault back in from there.
func releaseBinaryPages() { releaseFilePages("") }

// releaseFilePages lets go of the resident pages of the process's
// read-only mappings of its own binary and of the files at paths. The
// `make run` broker calls it each time it goes quiet after work
// (reclaim.go), with its bolt file: serving maps the 64 KB around each
// piece of code it runs, so a few requests left 10 to 15 MiB of the binary
// mapped of which they ran a fraction; and the reaper's pass over every
// instance's partition, every 30 s, mapped the whole bolt file, which
// grows with the data (37 MiB after the load run's 14,000 provisions). The
// pages stay in the page cache: what the next requests need faults back in
// from there, a minor fault each 64 KB.
//
// MADV_DONTNEED on a private file mapping discards the process's own
// copies of its pages, so a mapping with any (its Anonymous pages: written,
// as a relocation would) is left alone: only clean file pages are let go.
// bbolt maps its file shared and read-only (it writes with pwrite), so
// its pages are always clean; a read in progress faults its page back.
func releaseFilePages(paths ...string) {
	mappings, err := readOnlyMappings(paths...)
	if err != nil {
		return
	}
	for _, m := range mappings {
		if m.anonymousKiB == 0 {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.lo), uintptr(m.hi-m.lo), syscall.MADV_DONTNEED)
		}
	}
}

// fileMapping is a read-only mapping of a file: its address range, and how
// much of it is resident and how much of that the process wrote (its own
// anonymous copies), from /proc/self/smaps.
type fileMapping struct {
	lo, hi                    uint64
	residentKiB, anonymousKiB int
}

// readOnlyMappings reads the process's read-only mappings of its own
// binary ("") and of the files at paths from /proc/self/smaps.
func readOnlyMappings(paths ...string) ([]fileMapping, error) {
	files := map[string]bool{}
	for _, p := range paths {
		if p == "" {
			exe, err := os.Readlink("/proc/self/exe")
			if err != nil {
				return nil, err
			}
			p = exe
		} else if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		files[p] = true
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mappings []fileMapping
	var m *fileMapping // the mapping of one of files whose fields follow, if any
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
			if len(fields) >= 6 && files[fields[5]] && !strings.Contains(fields[1], "w") && errLo == nil && errHi == nil {
				mappings = append(mappings, fileMapping{lo: l, hi: h})
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
