package kind

import (
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// TestPrinterIsXTextsEnglish: Printer formats every kind of number the
// messages carry as golang.org/x/text/message's English printer, which it
// replaces, does, byte for byte: integers under %d and %v, floats under %v
// (the bounds of minimum, maximum, exclusiveMinimum, exclusiveMaximum and
// multipleOf), with the other verbs and strings around them.
func TestPrinterIsXTextsEnglish(t *testing.T) {
	want := message.NewPrinter(language.English)
	got := &Printer{}
	check := func(format string, args ...any) {
		t.Helper()
		w := want.Sprintf(format, args...)
		if g := got.Sprintf(format, args...); g != w {
			t.Errorf("Sprintf(%q, %v) = %q, x/text's %q", format, args, g, w)
		}
	}
	ints := []int{0, 1, -1, 9, 10, 99, 100, 999, 1000, -1000, 1001, 12345, 999999, 1000000, -1234567, math.MaxInt, math.MinInt}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 2.5, -2.5, 3, 0.1, 0.3, 1.0 / 3, 2.0 / 3, 100, 999999, 999999.5,
		1e5, 123456.5, 1e6, 1234567, 1e-4, 1e-5, 0.00012345, 1.5e-7, 1e15 + 0.3, 1e21, 1e100, 12345678.9,
		1.0000000000000002, math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-300, math.Inf(1), math.Inf(-1), math.NaN()}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ints = append(ints, int(r.Int64N(1<<40))-1<<39)
		f := r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
		floats = append(floats, f, math.Round(f), math.Round(f*100)/100)
	}
	for _, n := range ints {
		check("%d", n)
		check("%v", n)
		check("min %d items required to match contains schema, but matched %d items at %v", n, n/7, "1 2")
	}
	for _, f := range floats {
		check("%v", f)
		check("minimum: got %v, want %v", f, -f/3)
	}
	check("'oneOf' failed, subschemas %d, %d matched", 0, 1000)
	check("invalid jsonType %T", 1.5)
	check("%s does not match pattern %s", "'a%b'", "'^x$'")
	check("value must be %s", "1.5")
	check("%q %x %5d %-5d|%7d|%-7d|%8v|%d%%%v", "s", 255, 1000, 1000, 1000, -1000, 2.5e-7, 1234, 12345.5)
	check("invalid jsonType %T", 1000)
	check("element %d must be %d characters long; %d %d %d %v %q", int32(1000), uint8(200), int64(-123456), uint64(math.MaxUint64), int16(-32768), float32(1234.5678), 'x')
	check("%v %v %v", float32(1e-7), float32(3.4e38), float32(0.1))
}
