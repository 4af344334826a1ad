package cloudformation

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The subset reader reads the YAML CloudFormation templates are written
// in (block mappings and sequences, flow ones on one line, plain, quoted
// and block scalars, short-form tags such as !Ref) without yaml.v3, which
// is a tenth of the worker's bundle: the worker built without yaml.v3
// (osb_without_yaml) reads with it the template a stack runs, which
// CloudFormation gives back as it was written. It refuses what it does
// not know (anchors, aliases, multi-line plain or quoted scalars, flow
// collections over several lines, complex keys, directives, several
// documents) rather than guess: what it reads, it reads as yaml.v3 does
// (FuzzSubsetYAML, TestSubsetYAMLReadsEveryTemplate), and make build
// keeps yaml.v3 in the worker when a template of the catalog is not read
// so.

type subsetKind uint8

const (
	subsetScalar subsetKind = iota + 1
	subsetMapping
	subsetSequence
)

// subsetNode is a node as the subset reader reads it.
type subsetNode struct {
	kind subsetKind
	// tag is the node's tag as written (!Ref), or empty.
	tag string
	// value is a scalar's text; plain says it was written plain (so
	// resolved: 5 is a number, "5" a string).
	value string
	plain bool
	// keys and content are a mapping's keys and values, in order; content
	// a sequence's items.
	keys    []string
	content []*subsetNode
}

// errSubset is a YAML the subset reader does not read.
type errSubset struct {
	line int
	what string
}

func (e *errSubset) Error() string {
	return fmt.Sprintf("line %d: %s, which the worker's YAML reader does not read (it was built without yaml.v3)", e.line, e.what)
}

type subsetLine struct {
	n      int // 1-based line number
	indent int
	text   string // the line without its indentation
}

type subsetReader struct {
	lines []subsetLine
	i     int
}

// readSubsetYAML reads a one-document YAML body into nodes; nil for an
// empty document.
func readSubsetYAML(body []byte) (*subsetNode, error) {
	if !utf8.Valid(body) {
		return nil, errors.New("not valid UTF-8")
	}
	r := &subsetReader{}
	text := strings.TrimPrefix(string(body), "\uFEFF")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	// YAML's printable characters only (a tab and a line break aside).
	if i := strings.IndexFunc(text, func(c rune) bool {
		return c < 0x20 && c != '\n' && c != '\t' && c != '\r' || c >= 0x7f && c <= 0x9f || c == 0xfeff || c >= 0xfffe
	}); i >= 0 {
		return nil, &errSubset{strings.Count(text[:i], "\n") + 1, "a character YAML does not print"}
	}
	for n, l := range strings.Split(text, "\n") {
		if strings.ContainsAny(l, "\r\t") {
			return nil, &errSubset{n + 1, "a tab or a carriage return"}
		}
		trimmed := strings.TrimLeft(l, " ")
		r.lines = append(r.lines, subsetLine{n: n + 1, indent: len(l) - len(trimmed), text: trimmed})
	}
	r.skipBlank()
	if r.i < len(r.lines) && r.lines[r.i].indent == 0 && (r.lines[r.i].text == "---" || strings.HasPrefix(r.lines[r.i].text, "--- #")) {
		r.i++
		r.skipBlank()
	}
	if r.i == len(r.lines) {
		return nil, nil
	}
	first := r.lines[r.i]
	if strings.HasPrefix(first.text, "%") || strings.HasPrefix(first.text, "---") {
		return nil, &errSubset{first.n, "a directive or a document marker"}
	}
	node, err := r.block(first.indent, -1)
	if err != nil {
		return nil, err
	}
	if r.skipBlank(); r.i < len(r.lines) {
		return nil, &errSubset{r.lines[r.i].n, "text after the document, or out of its indentation"}
	}
	return node, nil
}

// blank: an empty line or a comment.
func (l subsetLine) blank() bool { return l.text == "" || l.text[0] == '#' }

func (r *subsetReader) skipBlank() {
	for r.i < len(r.lines) && r.lines[r.i].blank() {
		r.i++
	}
}

// block reads the block node at the current line, indented by indent;
// parent is the indentation of the mapping whose value it is (a sequence
// may sit at its key's indentation), or -1.
func (r *subsetReader) block(indent, parent int) (*subsetNode, error) {
	l := r.lines[r.i]
	if l.text == "-" || strings.HasPrefix(l.text, "- ") {
		return r.sequence(indent, l.text)
	}
	if _, _, ok, err := splitKey(l); err != nil {
		return nil, err
	} else if ok {
		return r.mapping(indent, l.text)
	}
	// A scalar or flow collection alone: the document's root.
	if parent >= 0 {
		return nil, &errSubset{l.n, "a multi-line plain scalar"}
	}
	r.i++
	return r.inline(l, l.text)
}

// sequence reads the items "- …" at indent, starting with the one whose
// text (from the dash on) is first.
func (r *subsetReader) sequence(indent int, first string) (*subsetNode, error) {
	seq := &subsetNode{kind: subsetSequence}
	text := first
	for {
		l := r.lines[r.i]
		rest := strings.TrimLeft(strings.TrimPrefix(text, "-"), " ")
		item, err := r.value(l, rest, indent, indent+len(text)-len(rest), true)
		if err != nil {
			return nil, err
		}
		seq.content = append(seq.content, item)
		r.skipBlank()
		if r.i == len(r.lines) || r.lines[r.i].indent != indent {
			break
		}
		if text = r.lines[r.i].text; text != "-" && !strings.HasPrefix(text, "- ") {
			break
		}
	}
	return seq, nil
}

// mapping reads the "key: value" lines at indent, starting with the one
// whose text (from the key on) is first.
func (r *subsetReader) mapping(indent int, first string) (*subsetNode, error) {
	m := &subsetNode{kind: subsetMapping}
	text := first
	for {
		l := r.lines[r.i]
		key, rest, ok, err := splitKey(subsetLine{n: l.n, text: text})
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, &errSubset{l.n, "a line that is neither a key nor an item where a mapping's keys are"}
		}
		for _, k := range m.keys {
			if k == key {
				return nil, &errSubset{l.n, fmt.Sprintf("the key %q twice", key)}
			}
		}
		v, err := r.value(l, rest, indent, -1, false)
		if err != nil {
			return nil, err
		}
		m.keys = append(m.keys, key)
		m.content = append(m.content, v)
		r.skipBlank()
		if r.i == len(r.lines) || r.lines[r.i].indent != indent {
			break
		}
		if t := r.lines[r.i].text; t == "-" || strings.HasPrefix(t, "- ") {
			break
		}
		text = r.lines[r.i].text
	}
	return m, nil
}

// value reads the value of a key or an item, whose text on line l is
// rest; indent is the key's or the dash's indentation. An item's value may
// be a mapping that starts on the dash's line, at column inline.
func (r *subsetReader) value(l subsetLine, rest string, indent, inline int, item bool) (*subsetNode, error) {
	tag := ""
	if strings.HasPrefix(rest, "!") {
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		tag, rest = rest[:end], strings.TrimLeft(rest[end:], " ")
		if err := checkTag(l.n, tag); err != nil {
			return nil, err
		}
		if strings.HasPrefix(rest, "!") {
			return nil, &errSubset{l.n, "two tags"}
		}
	}
	if item && tag == "" && rest != "" && rest[0] != '#' {
		// "- - x" and the items under it at the same column.
		if strings.HasPrefix(rest, "- ") || rest == "-" {
			return r.sequence(inline, rest)
		}
		if _, _, ok, err := splitKey(subsetLine{n: l.n, text: rest}); err != nil {
			return nil, err
		} else if ok {
			// "- Key: value" and the keys under it at the same column.
			return r.mapping(inline, rest)
		}
	}
	if rest == "" || rest[0] == '#' {
		// The value is the block under the line (or empty: null).
		r.i++
		r.skipBlank()
		if r.i < len(r.lines) {
			next := r.lines[r.i]
			nested := next.indent > indent
			// A mapping's value may be a sequence at its key's indentation.
			if !item && next.indent == indent && (next.text == "-" || strings.HasPrefix(next.text, "- ")) {
				nested = true
			}
			if nested {
				n, err := r.block(next.indent, indent)
				if err != nil {
					return nil, err
				}
				n.tag = tag
				return n, nil
			}
		}
		return &subsetNode{kind: subsetScalar, tag: tag, plain: true}, nil
	}
	if rest[0] == '|' || rest[0] == '>' {
		n, err := r.blockScalar(l, rest, indent)
		if err != nil {
			return nil, err
		}
		n.tag = tag
		return n, nil
	}
	r.i++
	n, err := r.inline(l, rest)
	if err != nil {
		return nil, err
	}
	if tag != "" {
		n.tag = tag
	}
	// A plain scalar continued on the lines under it.
	if r.skipBlank(); r.i < len(r.lines) && r.lines[r.i].indent > indent {
		return nil, &errSubset{r.lines[r.i].n, "a multi-line scalar, or text indented under a value"}
	}
	return n, nil
}

// inline reads a value that is all on one line: a flow collection or a
// scalar, and nothing after it but a comment.
func (r *subsetReader) inline(l subsetLine, text string) (*subsetNode, error) {
	p := &subsetFlow{line: l.n, s: text}
	n, err := p.node(false)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.s) && p.s[p.pos] != '#' {
		return nil, &errSubset{l.n, fmt.Sprintf("text after a value (%q)", p.s[p.pos:])}
	}
	if p.pos < len(p.s) && p.pos > 0 && p.s[p.pos-1] != ' ' {
		return nil, &errSubset{l.n, "a comment not set off by a space"}
	}
	return n, nil
}

// blockScalar reads a literal (|) or folded (>) scalar whose header is
// rest, and its lines under l.
func (r *subsetReader) blockScalar(l subsetLine, header string, indent int) (*subsetNode, error) {
	style, chomp := header[0], byte(0)
	h := header[1:]
	if h != "" && (h[0] == '-' || h[0] == '+') {
		chomp, h = h[0], h[1:]
	}
	if t := strings.TrimLeft(h, " "); (h != "" && h[0] != ' ') || (t != "" && t[0] != '#') {
		return nil, &errSubset{l.n, "a block scalar's header with an indentation indicator or text"}
	}
	r.i++
	// Its lines: every line indented further than the key, and the blank
	// ones among them.
	start := r.i
	end := r.i
	for j := r.i; j < len(r.lines); j++ {
		if r.lines[j].text == "" {
			continue
		}
		if r.lines[j].indent <= indent {
			break
		}
		end = j + 1
	}
	lines := r.lines[start:end]
	// Blank lines after its last line are kept with +: refused, rather
	// than counted.
	trailing := end < len(r.lines) && r.lines[end].text == ""
	r.i = end
	contentIndent := -1
	for _, cl := range lines {
		if cl.text != "" {
			contentIndent = cl.indent
			break
		}
	}
	// Lines of spaces after it, which a block scalar may keep: refused.
	for j := end; j < len(r.lines) && r.lines[j].text == ""; j++ {
		if r.lines[j].indent > indent {
			return nil, &errSubset{r.lines[j].n, "a block scalar's line of spaces"}
		}
	}
	var parts []string
	for _, cl := range lines {
		switch {
		case cl.text == "":
			if cl.indent > contentIndent && contentIndent >= 0 {
				return nil, &errSubset{cl.n, "a block scalar's line of spaces"}
			}
			parts = append(parts, "")
		case cl.indent < contentIndent:
			return nil, &errSubset{cl.n, "a block scalar's line less indented than its first"}
		case cl.indent > contentIndent:
			if style == '>' {
				return nil, &errSubset{cl.n, "a folded scalar's more-indented line"}
			}
			parts = append(parts, strings.Repeat(" ", cl.indent-contentIndent)+cl.text)
		default:
			parts = append(parts, cl.text)
		}
	}
	if contentIndent < 0 {
		// Only blank lines, or none.
		if chomp == '+' {
			return nil, &errSubset{l.n, "an empty block scalar kept with +"}
		}
		return &subsetNode{kind: subsetScalar, value: ""}, nil
	}
	// Blank lines before the first: each a line break.
	lead := 0
	for lead < len(parts) && parts[lead] == "" {
		lead++
	}
	body := parts[lead:]
	var b strings.Builder
	b.WriteString(strings.Repeat("\n", lead))
	if style == '|' {
		b.WriteString(strings.Join(body, "\n"))
	} else {
		// A line break between two lines is a space; each blank line
		// between them is a line break (the one ending the line before
		// is folded away).
		for k, s := range body {
			switch {
			case s == "":
				b.WriteString("\n")
			case k > 0 && body[k-1] != "":
				b.WriteString(" ")
			}
			b.WriteString(s)
		}
	}
	// Its last line's break, unless stripped, or the body ends without
	// one.
	switch {
	case chomp == '+' && trailing:
		return nil, &errSubset{l.n, "a block scalar kept with + before blank lines"}
	case chomp != '-' && end < len(r.lines):
		b.WriteString("\n")
	}
	return &subsetNode{kind: subsetScalar, value: b.String()}, nil
}

// localTag is a tag the subset reads: !Name, as CloudFormation's are.
// This and the patterns below compile when a template is first read: a
// function that reads none (the api) never does.
var localTag = lazyPattern(`^![A-Za-z][A-Za-z0-9]*$`)

// checkTag accepts a local tag (!Name) only.
func checkTag(line int, tag string) error {
	if !localTag().MatchString(tag) {
		return &errSubset{line, fmt.Sprintf("the tag %q", tag)}
	}
	return nil
}

// splitKey splits a "key: value" line into its key and the value's text;
// ok is false when the line is no key.
func splitKey(l subsetLine) (key, rest string, ok bool, err error) {
	t := l.text
	if t == "" {
		return "", "", false, nil
	}
	switch t[0] {
	case '"', '\'':
		p := &subsetFlow{line: l.n, s: t}
		n, err := p.quoted()
		if err != nil {
			return "", "", false, err
		}
		if p.pos < len(t) && t[p.pos] == ':' && (p.pos+1 == len(t) || t[p.pos+1] == ' ') {
			return n.value, strings.TrimLeft(t[p.pos+1:], " "), true, nil
		}
		return "", "", false, nil
	case '?', '&', '*', '%', '@', '`', '|', '>', '!':
		if t[0] == '!' {
			// A tag before a key (a tagged key) is refused; a tagged
			// scalar or collection is no key.
			if i := strings.Index(t, ": "); i > 0 && !strings.ContainsAny(t[:i], "[{\"'") {
				return "", "", false, &errSubset{l.n, "a tagged key"}
			}
			return "", "", false, nil
		}
		return "", "", false, &errSubset{l.n, fmt.Sprintf("the indicator %q", t[0])}
	case '[', '{', '#':
		return "", "", false, nil
	case '-':
		if t == "-" || strings.HasPrefix(t, "- ") {
			return "", "", false, nil
		}
	}
	for i := 0; i < len(t); i++ {
		switch {
		case t[i] == ':' && (i+1 == len(t) || t[i+1] == ' '):
			key = strings.TrimRight(t[:i], " ")
			if err := checkPlain(l.n, key, false); err != nil {
				return "", "", false, err
			}
			if !plainKey(key) {
				return "", "", false, &errSubset{l.n, fmt.Sprintf("the key %q, which may be no string", key)}
			}
			return key, strings.TrimLeft(t[i+1:], " "), true, nil
		case t[i] == '#' && i > 0 && t[i-1] == ' ':
			return "", "", false, nil
		}
	}
	return "", "", false, nil
}

// plainKey says a plain key is a string to yaml.v3 for sure: not null,
// a bool, a number or a timestamp (which would make its mapping one with
// keys of any type).
func plainKey(key string) bool {
	v, isString := resolvePlain(key).(string)
	return key != "" && isString && v == key && !strings.ContainsRune("+-.0123456789", rune(key[0]))
}

// checkPlain refuses a plain scalar the subset does not read as yaml.v3
// does: one that starts with an indicator, holds ": " or " #", or (in a
// flow collection) a flow indicator.
func checkPlain(line int, s string, flow bool) error {
	if s == "" {
		return nil
	}
	// A dash followed by more is text (-1, -foo); every other indicator
	// is refused where it starts a scalar.
	if c := s[0]; strings.ContainsRune("?:,[]{}#&*!|>'\"%@`", rune(c)) ||
		(c == '-' && (len(s) == 1 || s[1] == ' ' || (flow && strings.ContainsRune(",[]{}", rune(s[1]))))) {
		return &errSubset{line, fmt.Sprintf("the plain scalar %q", s)}
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") || strings.Contains(s, " #") || (flow && strings.ContainsAny(s, ",[]{}")) {
		return &errSubset{line, fmt.Sprintf("the plain scalar %q", s)}
	}
	if s == "<<" {
		return &errSubset{line, "a merge key"}
	}
	return nil
}

// subsetFlow reads the values that stand on one line: flow collections,
// quoted and plain scalars.
type subsetFlow struct {
	line int
	s    string
	pos  int
}

func (p *subsetFlow) space() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

// node reads a value; in says it is inside a flow collection.
func (p *subsetFlow) node(in bool) (*subsetNode, error) {
	p.space()
	tag := ""
	if p.pos < len(p.s) && p.s[p.pos] == '!' {
		end := p.pos
		for end < len(p.s) && p.s[end] != ' ' && !(in && strings.ContainsRune(",]}", rune(p.s[end]))) {
			end++
		}
		tag = p.s[p.pos:end]
		if err := checkTag(p.line, tag); err != nil {
			return nil, err
		}
		p.pos = end
		if p.space(); p.pos < len(p.s) && p.s[p.pos] == '!' {
			return nil, &errSubset{p.line, "two tags"}
		}
	}
	var n *subsetNode
	var err error
	switch {
	case p.pos == len(p.s) || (in && strings.ContainsRune(",]}", rune(p.s[p.pos]))):
		if in {
			return nil, &errSubset{p.line, "an empty entry in a flow collection"}
		}
		n = &subsetNode{kind: subsetScalar, plain: true}
	case p.s[p.pos] == '[':
		n, err = p.sequence()
	case p.s[p.pos] == '{':
		n, err = p.mapping()
	case p.s[p.pos] == '"' || p.s[p.pos] == '\'':
		n, err = p.quoted()
	default:
		n, err = p.plain(in)
	}
	if err != nil {
		return nil, err
	}
	n.tag = tag
	return n, nil
}

func (p *subsetFlow) sequence() (*subsetNode, error) {
	p.pos++ // [
	seq := &subsetNode{kind: subsetSequence}
	for {
		p.space()
		if p.pos == len(p.s) {
			return nil, &errSubset{p.line, "a flow sequence over several lines"}
		}
		if p.s[p.pos] == ']' {
			p.pos++
			return seq, nil
		}
		item, err := p.node(true)
		if err != nil {
			return nil, err
		}
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ':' {
			return nil, &errSubset{p.line, "a mapping in a flow sequence"}
		}
		seq.content = append(seq.content, item)
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			p.space()
			if p.pos < len(p.s) && p.s[p.pos] == ']' {
				return nil, &errSubset{p.line, "a flow sequence's trailing comma"}
			}
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == ']' {
			continue
		}
		return nil, &errSubset{p.line, "a flow sequence over several lines, or text in it"}
	}
}

func (p *subsetFlow) mapping() (*subsetNode, error) {
	p.pos++ // {
	m := &subsetNode{kind: subsetMapping}
	for {
		p.space()
		if p.pos == len(p.s) {
			return nil, &errSubset{p.line, "a flow mapping over several lines"}
		}
		if p.s[p.pos] == '}' {
			p.pos++
			return m, nil
		}
		k, err := p.node(true)
		if err != nil {
			return nil, err
		}
		if k.kind != subsetScalar || k.tag != "" || k.value == "" {
			return nil, &errSubset{p.line, "a flow mapping's key that is no string"}
		}
		if k.plain && !plainKey(k.value) {
			return nil, &errSubset{p.line, fmt.Sprintf("the key %q, which may be no string", k.value)}
		}
		if p.pos >= len(p.s) || p.s[p.pos] != ':' || p.pos+1 == len(p.s) || p.s[p.pos+1] != ' ' {
			return nil, &errSubset{p.line, "a flow mapping's key without \": \""}
		}
		p.pos++
		for _, have := range m.keys {
			if have == k.value {
				return nil, &errSubset{p.line, fmt.Sprintf("the key %q twice", k.value)}
			}
		}
		v, err := p.node(true)
		if err != nil {
			return nil, err
		}
		m.keys = append(m.keys, k.value)
		m.content = append(m.content, v)
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			p.space()
			if p.pos < len(p.s) && p.s[p.pos] == '}' {
				return nil, &errSubset{p.line, "a flow mapping's trailing comma"}
			}
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			continue
		}
		return nil, &errSubset{p.line, "a flow mapping over several lines, or text in it"}
	}
}

// plain reads a plain scalar: to the end of the line (but a comment), or
// in a flow collection to the next indicator.
func (p *subsetFlow) plain(in bool) (*subsetNode, error) {
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '#' && p.pos > start && p.s[p.pos-1] == ' ' {
			break
		}
		if in && (c == ',' || c == ']' || c == '}' || (c == ':' && p.pos+1 < len(p.s) && p.s[p.pos+1] == ' ')) {
			break
		}
		p.pos++
	}
	v := strings.TrimRight(p.s[start:p.pos], " ")
	if err := checkPlain(p.line, v, in); err != nil {
		return nil, err
	}
	return &subsetNode{kind: subsetScalar, value: v, plain: true}, nil
}

// quoted reads a single- or double-quoted scalar that ends on its line.
func (p *subsetFlow) quoted() (*subsetNode, error) {
	q := p.s[p.pos]
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.s) {
			return nil, &errSubset{p.line, "a quoted scalar over several lines"}
		}
		c := p.s[p.pos]
		switch {
		case c == q && q == '\'' && p.pos+1 < len(p.s) && p.s[p.pos+1] == '\'':
			b.WriteByte('\'')
			p.pos += 2
		case c == q:
			p.pos++
			return &subsetNode{kind: subsetScalar, value: b.String()}, nil
		case c == '\\' && q == '"':
			if p.pos+1 >= len(p.s) {
				return nil, &errSubset{p.line, "a quoted scalar over several lines"}
			}
			e := p.s[p.pos+1]
			p.pos += 2
			if s, ok := subsetEscapes[e]; ok {
				b.WriteString(s)
				continue
			}
			size := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if size == 0 || p.pos+size > len(p.s) {
				return nil, &errSubset{p.line, fmt.Sprintf("the escape \\%c", e)}
			}
			code, err := strconv.ParseUint(p.s[p.pos:p.pos+size], 16, 32)
			if err != nil || !utf8.ValidRune(rune(code)) {
				return nil, &errSubset{p.line, fmt.Sprintf("the escape \\%c%s", e, p.s[p.pos:p.pos+size])}
			}
			b.WriteRune(rune(code))
			p.pos += size
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
}

var subsetEscapes = map[byte]string{'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", 'n': "\n", 'v': "\v", 'f': "\f",
	'r': "\r", 'e': "\x1b", ' ': " ", '"': "\"", '\\': "\\", 'N': "\u0085", '_': "\u00a0", 'L': "\u2028", 'P': "\u2029"}

// yamlFloat is yaml.v3's float.
var yamlFloat = lazyPattern(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// subsetRefused is what resolvePlain gives for a plain scalar yaml.v3
// reads as a timestamp (a time.Time, which no template means).
type subsetRefused struct{}

// timestampLike: yaml.v3 tries a plain scalar that starts so as a
// timestamp.
var timestampLike = lazyPattern(`^[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?`)

// resolvePlain is a plain scalar's value as yaml.v3 decodes it into an
// interface (its resolve): null, a bool, an int (int64, uint64 past int),
// a float64, else the string; subsetRefused{} for a timestamp.
func resolvePlain(s string) any {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil
	case "true", "True", "TRUE":
		return true
	case "false", "False", "FALSE":
		return false
	case ".nan", ".NaN", ".NAN":
		return math.NaN()
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return math.Inf(1)
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1)
	}
	switch c := s[0]; {
	case c == '.':
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
	case c == '+' || c == '-' || (c >= '0' && c <= '9'):
		if timestampLike().MatchString(s) {
			return subsetRefused{}
		}
		plain := strings.ReplaceAll(s, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			if i == int64(int(i)) {
				return int(i)
			}
			return i
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return u
		}
		if yamlFloat().MatchString(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return f
			}
		}
		for _, base := range []struct {
			prefix string
			base   int
		}{{"0b", 2}, {"0o", 8}} {
			if rest, ok := strings.CutPrefix(plain, base.prefix); ok {
				if i, err := strconv.ParseInt(rest, base.base, 64); err == nil {
					return int(i)
				}
			} else if rest, ok := strings.CutPrefix(plain, "-"+base.prefix); ok {
				if i, err := strconv.ParseInt("-"+rest, base.base, 64); err == nil {
					return int(i)
				}
			}
		}
	}
	return s
}

// subsetValue is what yaml.v3 decodes n into, as an interface: tags but
// the standard ones are no more than text (!Ref X is "X").
func subsetValue(n *subsetNode) (any, error) {
	switch n.kind {
	case subsetMapping:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := subsetValue(n.content[i])
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case subsetSequence:
		l := make([]any, 0, len(n.content))
		for _, c := range n.content {
			v, err := subsetValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	}
	if !n.plain || n.tag != "" {
		return n.value, nil
	}
	v := resolvePlain(n.value)
	if _, refused := v.(subsetRefused); refused {
		return nil, fmt.Errorf("the timestamp %q, which the worker's YAML reader does not read (it was built without yaml.v3)", n.value)
	}
	return v, nil
}

// subsetTemplate is yamlTemplate with the subset reader.
func subsetTemplate(body []byte) (map[string]any, []string, error) {
	n, err := readSubsetYAML(body)
	if err != nil {
		return nil, nil, fmt.Errorf("not read as YAML: %w", err)
	}
	if n == nil {
		return nil, nil, errors.New("a template is a mapping with a Resources section, got nothing")
	}
	v, err := subsetValue(n)
	if err != nil {
		return nil, nil, fmt.Errorf("not read as YAML: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, errors.New("a template is a mapping with a Resources section")
	}
	return m, subsetMacros(n), nil
}

// subsetMacros is taggedMacros over the subset's nodes.
func subsetMacros(node *subsetNode) []string {
	var out []string
	var tagged func(n *subsetNode, at string)
	tagged = func(n *subsetNode, at string) {
		if n.tag == "!Transform" {
			out = append(out, "Fn::Transform at "+at)
			return
		}
		switch n.kind {
		case subsetMapping:
			for i, key := range n.keys {
				path := key
				if at != "" {
					path = at + "/" + key
				}
				switch {
				case key == "Fn::Transform":
					out = append(out, "Fn::Transform at "+at)
				case at == "" && key == "Transform":
				default:
					tagged(n.content[i], path)
				}
			}
		case subsetSequence:
			for i, c := range n.content {
				tagged(c, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	tagged(node, "")
	return out
}

// subsetDocument is the YAML part of templateDocument with the subset
// reader: short-form tags as their long forms.
func subsetDocument(body []byte) (map[string]any, error) {
	n, err := readSubsetYAML(body)
	if err != nil {
		return nil, fmt.Errorf("not read as YAML: %w", err)
	}
	if n == nil {
		return nil, errors.New("a template is a mapping with a Resources section")
	}
	v, err := subsetLongForm(n)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("a template is a mapping with a Resources section")
	}
	return doc, nil
}

// subsetLongForm is longForm over the subset's nodes.
func subsetLongForm(n *subsetNode) (any, error) {
	var v any
	switch n.kind {
	case subsetMapping:
		m := map[string]any{}
		for i, k := range n.keys {
			val, err := subsetLongForm(n.content[i])
			if err != nil {
				return nil, err
			}
			m[k] = val
		}
		v = m
	case subsetSequence:
		l := []any{}
		for _, c := range n.content {
			val, err := subsetLongForm(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	default:
		var err error
		if v, err = subsetValue(&subsetNode{kind: subsetScalar, value: n.value, plain: n.plain && n.tag == ""}); err != nil {
			return nil, err
		}
	}
	if n.tag == "" {
		return v, nil
	}
	return tagLongForm(n.tag[1:], v), nil
}

// tagLongForm is the long form of a value under a short-form tag (name
// without its "!"), for both readers of YAML: !Ref and !Condition keep
// their names, !GetAtt's "res.attr" becomes [res, attr], any other is its
// Fn:: function.
func tagLongForm(name string, v any) any {
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: v}
	case "GetAtt":
		if str, ok := v.(string); ok {
			res, attr, _ := strings.Cut(str, ".")
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + name: v}
}
