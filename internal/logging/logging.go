// Package logging owns the broker's log format: JSON lines from log/slog,
// each carrying the attributes the request put in its context (request
// identity, instance_id, binding_id, operation_id, user), with every key
// once per line.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

type ctxKey struct{}

// With returns a context whose log lines carry attrs too. An attr whose
// key the context carries already replaces it.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev := contextAttrs(ctx)
	c := &attrsContext{Context: ctx}
	if n := len(prev) + len(attrs); n <= len(c.held) {
		c.attrs = append(append(c.held[:0:n], prev...), attrs...)
	} else {
		c.attrs = slices.Concat(prev, attrs)
	}
	return c
}

// attrsContext is a context that carries log attributes, with room for the
// few a request's context gathers (its ids, its operation's): one
// allocation where context.WithValue would take three (the context, the
// attributes, and their slice put in an interface).
type attrsContext struct {
	context.Context
	attrs []slog.Attr
	held  [6]slog.Attr
}

func (c *attrsContext) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// contextAttrs returns the attributes With put in ctx.
func contextAttrs(ctx context.Context) []slog.Attr {
	if c, ok := ctx.Value(ctxKey{}).(*attrsContext); ok {
		return c.attrs
	}
	return nil
}

// New returns a JSON logger writing to w at level.
func New(w io.Writer, level slog.Level) *slog.Logger {
	out := &lineWriter{w: w}
	return slog.New(contextHandler{
		inner:  slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}),
		out:    out,
		scopes: []scope{{}},
	})
}

// ParseLevel reads a log level as the broker's variables spell it: debug,
// info, warn or error, in any case.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: want debug, info, warn or error", s)
}

// contextHandler adds the context's attributes to each record and writes
// every key once per line (once per group). Where a key repeats, the most
// specific value wins: the record's own over the logger's With, and With
// over the context's; within each, the later over the earlier. The call
// site knows what the line is about (the operation it stops, say), while
// the context says which request or step the line belongs to, and a later
// With narrows an earlier one.
//
// To choose, the handler must see every attribute at once, so it keeps
// With's attributes and groups itself and hands the JSON handler a fresh
// record holding all of them.
type contextHandler struct {
	inner slog.Handler // the JSON handler, with no attributes or groups
	// out is where inner writes, and where a line without groups or
	// values that only encoding/json writes is written directly
	// (appendLine), as inner would write it.
	out *lineWriter
	// scopes[0] is the top level; each further scope is a group opened by
	// WithGroup, holding the attributes With added while it was innermost.
	scopes []scope
}

type scope struct {
	group string
	attrs []slog.Attr
}

func (h contextHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handle(ctx, r, nil)
}

// LogAttrs is l.LogAttrs(ctx, level, msg, attrs...), without what slog.Logger
// does for every line that a logger of New never uses: runtime.Callers,
// for a source only AddSource writes, and a copy of attrs into the record.
// Another logger's line goes through l.LogAttrs.
func LogAttrs(ctx context.Context, l *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	h, ok := l.Handler().(contextHandler)
	if !ok {
		l.LogAttrs(ctx, level, msg, attrs...)
		return
	}
	if h.Enabled(ctx, level) {
		_ = h.handle(ctx, slog.NewRecord(time.Now(), level, msg, 0), attrs)
	}
}

// handle writes r, with more of its own attributes after those it holds.
func (h contextHandler) handle(ctx context.Context, r slog.Record, more []slog.Attr) error {
	fromCtx := contextAttrs(ctx)
	// One slice for all the attributes of the innermost scope out, so that
	// a line without groups (nearly every one) copies them once.
	n := r.NumAttrs() + len(more) + len(fromCtx)
	for _, sc := range h.scopes {
		n += len(sc.attrs)
	}
	var held [16]slog.Attr // room for a line's attributes, on the stack
	attrs := held[:0]      // uniqueHeld works in it
	if n > len(held) {
		attrs = make([]slog.Attr, 0, n)
	}
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	attrs = append(attrs, more...)
	// Build from the innermost group out; the context's attributes belong
	// to the top level.
	for i := len(h.scopes) - 1; i >= 0; i-- {
		attrs = slices.Insert(attrs, 0, h.scopes[i].attrs...)
		if i == 0 {
			attrs = slices.Insert(attrs, 0, fromCtx...)
		}
		attrs = uniqueHeld(attrs)
		if i > 0 && len(attrs) > 0 {
			attrs = []slog.Attr{{Key: h.scopes[i].group, Value: slog.GroupValue(slices.Clone(attrs)...)}}
		}
	}
	if len(h.scopes) == 1 {
		if line := appendLine(buffers.Get().(*[]byte), r, attrs); line != nil {
			_, err := h.out.Write(*line)
			*line = (*line)[:0]
			buffers.Put(line)
			return err
		}
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(attrs...)
	return h.inner.Handle(ctx, out)
}

// lineWriter writes whole lines to w, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(line []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(line)
}

// buffers holds the lines' buffers. A new one has room for a line (about
// 200 to 400 bytes), so that a line written into it grows it no further: a
// buffer the pool did not keep (a collection empties it; under the race
// detector it drops a quarter of what it is given) costs two allocations,
// not one for each doubling of an empty slice.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendLine appends to *buf the line slog's JSON handler (without
// options) writes of r with attrs, each key once and resolved, instead of
// r's own, and returns buf; or nil, having appended nothing, when a value
// is of a kind it leaves to the handler (a group, a float, any other
// value: what encoding/json writes) or r's time or level is not the usual.
// It writes the line without a second record (an allocation for more
// than five attributes) and without the handler's generality.
func appendLine(buf *[]byte, r slog.Record, attrs []slog.Attr) *[]byte {
	if y := r.Time.Year(); r.Time.IsZero() || y < 0 || y >= 10000 {
		return nil
	}
	switch r.Level {
	case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
	default:
		return nil
	}
	for _, a := range attrs {
		if k := a.Value.Kind(); k == slog.KindGroup || k == slog.KindFloat64 || k == slog.KindAny || k == slog.KindLogValuer ||
			k == slog.KindTime && (a.Value.Time().Year() < 0 || a.Value.Time().Year() >= 10000) {
			return nil
		}
	}
	b := append(*buf, `{"time":"`...)
	b = r.Time.Round(0).AppendFormat(b, time.RFC3339Nano)
	b = append(append(b, `","level":"`...), r.Level.String()...)
	b = appendJSONString(append(b, `","msg":`...), r.Message)
	for _, a := range attrs {
		b = append(appendJSONString(append(b, ','), a.Key), ':')
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = appendJSONString(b, v.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindDuration:
			b = strconv.AppendInt(b, int64(v.Duration()), 10)
		case slog.KindTime:
			b = append(v.Time().AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
		}
	}
	*buf = append(b, "}\n"...)
	return buf
}

// appendJSONString appends s quoted as slog's JSON handler quotes it:
// \n, \r and \t, \u00XX for the other control characters, \ufffd for
// invalid UTF-8, \u2028 and \u2029 escaped; <, > and & as they are.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		var esc string
		size := 1
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		case c < 0x20:
			b = append(append(b, s[start:i]...), '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
			start = i
			continue
		default:
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				esc = `\ufffd`
			case r == '\u2028':
				esc = `\u2028`
			case r == '\u2029':
				esc = `\u2029`
			default:
				i += size
				continue
			}
		}
		b = append(append(b, s[start:i]...), esc...)
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

const hex = "0123456789abcdef"

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	scopes := slices.Clone(h.scopes)
	last := &scopes[len(scopes)-1]
	last.attrs = slices.Concat(last.attrs, attrs)
	return contextHandler{inner: h.inner, out: h.out, scopes: scopes}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return contextHandler{inner: h.inner, out: h.out, scopes: append(slices.Clip(h.scopes), scope{group: name})}
}

// unique returns attrs with each key once, keeping the last value given
// for a key. It resolves values, inlines groups without a key (as the JSON
// handler would), applies itself within groups, and leaves out what the
// JSON handler would leave out: attributes without a key, empty groups.
func unique(attrs []slog.Attr) []slog.Attr {
	return keepLast(appendInlined(make([]slog.Attr, 0, len(attrs)), attrs))
}

// uniqueOwned is unique of attrs that are the caller's to overwrite: unless
// they hold a group to inline, the result is built in attrs rather than in
// a new slice.
func uniqueOwned(attrs []slog.Attr) []slog.Attr {
	if slices.ContainsFunc(attrs, inlined) {
		return unique(attrs)
	}
	// Only drops attributes: never writes ahead of what it reads.
	flat := attrs[:0]
	for _, a := range attrs {
		if a.Key != "" {
			a.Value = a.Value.Resolve()
			flat = append(flat, a)
		}
	}
	return keepLast(flat)
}

// uniqueHeld is uniqueOwned(attrs), for attrs that may be on the caller's
// stack: a line without groups or values yet to resolve (nearly every one)
// is done in place, by code that lets attrs stay there (uniqueOwned,
// recursive, would move them to the heap), and any other in a copy.
func uniqueHeld(attrs []slog.Attr) []slog.Attr {
	if len(attrs) > maxScanned {
		return uniqueOwned(slices.Clone(attrs)) // keepLast's map
	}
	for _, a := range attrs {
		if k := a.Value.Kind(); a.Key == "" || k == slog.KindGroup || k == slog.KindLogValuer {
			return uniqueOwned(slices.Clone(attrs))
		}
	}
	kept := len(attrs)
	for i := len(attrs) - 1; i >= 0; i-- {
		if a := attrs[i]; !hasKey(attrs[kept:], a.Key) {
			kept--
			attrs[kept] = a
		}
	}
	return attrs[kept:]
}

// keepLast keeps the last attribute of each key in flat (unique within
// groups), in flat.
func keepLast(flat []slog.Attr) []slog.Attr {
	// Keep the last of each key, in place: walking back, the kept ones
	// gather at the end of flat, behind the one being read. A line has a
	// dozen attributes or so, which a scan of those kept tells apart
	// faster than a map; a long one gets the map.
	var seen map[string]bool
	if len(flat) > maxScanned {
		seen = make(map[string]bool, len(flat))
	}
	kept := len(flat)
	for i := len(flat) - 1; i >= 0; i-- {
		a := flat[i]
		if seen != nil && seen[a.Key] || seen == nil && hasKey(flat[kept:], a.Key) {
			continue
		}
		if a.Value.Kind() == slog.KindGroup {
			members := unique(a.Value.Group())
			if len(members) == 0 {
				continue // left out, so an earlier value of the key stands
			}
			a.Value = slog.GroupValue(members...)
		}
		if seen != nil {
			seen[a.Key] = true
		}
		kept--
		flat[kept] = a
	}
	return flat[kept:]
}

// appendInlined appends attrs to flat, resolved, with the members of each
// group without a key in its place and what has no key left out.
func appendInlined(flat, attrs []slog.Attr) []slog.Attr {
	for _, a := range attrs {
		a.Value = a.Value.Resolve()
		switch {
		case a.Value.Kind() == slog.KindGroup && a.Key == "":
			flat = appendInlined(flat, a.Value.Group())
		case a.Key != "":
			flat = append(flat, a)
		}
	}
	return flat
}

// inlined says whether unique inlines a, or may (a value not yet resolved):
// a group without a key.
func inlined(a slog.Attr) bool {
	return a.Key == "" && (a.Value.Kind() == slog.KindGroup || a.Value.Kind() == slog.KindLogValuer)
}

// maxScanned is the most attributes unique tells apart by scanning.
const maxScanned = 32

func hasKey(attrs []slog.Attr, key string) bool {
	for _, a := range attrs {
		if a.Key == key {
			return true
		}
	}
	return false
}
