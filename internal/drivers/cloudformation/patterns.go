package cloudformation

import (
	"regexp"
	"sync"
)

// lazyPattern is the regular expression expr, compiled on first use: the
// driver's patterns check settings, ARNs and messages that most starts never
// see, and compiling them all at package init was about 0.15 ms and 130 KB
// of every function's cold start.
func lazyPattern(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
