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
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	type span struct {
		lo, hi uint64
		clean  bool
	}
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && !strings.HasSuffix(fields[0], ":"):
			// A mapping's header: range, perms, offset, device, inode, path.
			lo, hi, _ := strings.Cut(fields[0], "-")
			l, errLo := strconv.ParseUint(lo, 16, 64)
			h, errHi := strconv.ParseUint(hi, 16, 64)
			ours := len(fields) >= 6 && fields[5] == exe && !strings.Contains(fields[1], "w")
			spans = append(spans, span{l, h, ours && errLo == nil && errHi == nil})
		case len(fields) >= 2 && fields[0] == "Anonymous:" && fields[1] != "0" && len(spans) > 0:
			spans[len(spans)-1].clean = false
		}
	}
	if sc.Err() != nil {
		return
	}
	for _, s := range spans {
		if s.clean {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(s.lo), uintptr(s.hi-s.lo), syscall.MADV_DONTNEED)
		}
	}
}
