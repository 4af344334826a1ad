package kind

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printer formats the messages of validation errors as
// golang.org/x/text/message's English printer did, which this copy of the
// library used: numbers under %d and %v in English's way (1,000; a float
// as its shortest form, 1.5×10⁻⁰⁷ past the exponents %g writes plainly),
// everything else as fmt does. The printer, its catalogs and the language
// tables were 0.12 MB of each function's bundle; TestPrinterIsXTextsEnglish
// compares the two on every kind of number.
type Printer struct{}

// Sprintf is fmt.Sprintf with the numbers in English's way.
func (*Printer) Sprintf(format string, args ...any) string {
	verbs := verbsOf(format)
	args = slices.Clone(args) // the caller's, which it may keep
	for i, a := range args {
		if i >= len(verbs) || verbs[i] != 'v' && verbs[i] != 'd' {
			continue
		}
		switch v := reflect.ValueOf(a); v.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			args[i] = number{v: a, text: groupInt(strconv.FormatInt(v.Int(), 10))}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			args[i] = number{v: a, text: groupInt(strconv.FormatUint(v.Uint(), 10))}
		case reflect.Float32:
			args[i] = number{v: a, text: englishFloat(v.Float(), 32), float: true}
		case reflect.Float64:
			args[i] = number{v: a, text: englishFloat(v.Float(), 64), float: true}
		}
	}
	return fmt.Sprintf(format, args...)
}

// verbsOf lists the verb of each argument of format, in order (the
// messages name no argument by index).
func verbsOf(format string) []rune {
	var verbs []rune
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.*", format[i]) >= 0 {
			i++
		}
		if i < len(format) && format[i] != '%' {
			verbs = append(verbs, rune(format[i]))
		}
	}
	return verbs
}

// number is a number with its English text, which %v, and %d for an
// integer, write (padded to a width, as x/text did); other flags write v
// as fmt does.
type number struct {
	v     any
	text  string
	float bool
}

func (n number) Format(f fmt.State, verb rune) {
	plain := true
	for _, flag := range "+# 0" {
		plain = plain && !f.Flag(int(flag))
	}
	_, hasPrec := f.Precision()
	if !plain || hasPrec || verb == 'd' && n.float {
		fmt.Fprintf(f, fmt.FormatString(f, verb), n.v)
		return
	}
	pad := ""
	if w, ok := f.Width(); ok && w > utf8.RuneCountInString(n.text) {
		pad = strings.Repeat(" ", w-utf8.RuneCountInString(n.text))
	}
	if f.Flag('-') {
		fmt.Fprint(f, n.text+pad)
	} else {
		fmt.Fprint(f, pad+n.text)
	}
}

// groupInt puts a comma between every three digits of an integer's
// decimal text (a leading '-' kept).
func groupInt(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	if len(s) <= 3 {
		return sign + s
	}
	var b strings.Builder
	b.WriteString(sign)
	head := len(s) % 3
	if head > 0 {
		b.WriteString(s[:head])
	}
	for i := head; i < len(s); i += 3 {
		if b.Len() > len(sign) {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// superscripts are the digits of an exponent.
var superscripts = [10]string{"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"}

// englishFloat is a float64's shortest form with %g's choice between the
// plain and the exponent form: the plain one grouped, the exponent one
// as ×10 and the exponent (two digits at least) in superscript.
func englishFloat(v float64, bitSize int) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "∞"
	case math.IsInf(v, -1):
		return "-∞"
	case v == 0:
		return "0" // -0 too
	}
	s := strconv.FormatFloat(v, 'g', -1, bitSize)
	mant, exp, scientific := strings.Cut(s, "e")
	intPart, frac, hasFrac := strings.Cut(mant, ".")
	out := groupInt(intPart)
	if hasFrac {
		out += "." + frac
	}
	if !scientific {
		return out
	}
	out += "×10"
	if exp[0] == '-' {
		out += "⁻"
	}
	for _, d := range exp[1:] {
		out += superscripts[d-'0']
	}
	return out
}
