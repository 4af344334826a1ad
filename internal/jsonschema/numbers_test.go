package jsonschema

import (
	"encoding/json"
	"math/big"
	"strconv"
	"testing"
)

// TestIntWithinAgreesWithTheRationals: the int64 short way says a number
// is within a schema's bounds only when the big.Rat comparisons that
// numValidate makes otherwise say so too, and says so for the integer
// bounds it is for.
func TestIntWithinAgreesWithTheRationals(t *testing.T) {
	rat := func(s string) *big.Rat {
		if s == "" {
			return nil
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("bad rational %q", s)
		}
		return r
	}
	bounds := []string{"", "-3", "0", "2", "5", "2.5", "9223372036854775808"}
	multiples := []string{"", "1", "3", "0.5", "-3"}
	for _, min := range bounds {
		for _, max := range bounds {
			for _, xmin := range []string{"", "-3", "2.5"} {
				for _, xmax := range []string{"", "5", "2.5"} {
					for _, mul := range multiples {
						s := &Schema{Minimum: rat(min), Maximum: rat(max), ExclusiveMinimum: rat(xmin), ExclusiveMaximum: rat(xmax), MultipleOf: rat(mul)}
						for n := int64(-8); n <= 8; n++ {
							v := json.Number(strconv.FormatInt(n, 10))
							got, ok := int64Of(v)
							if !ok || got != n {
								t.Fatalf("int64Of(%q) = %d, %v", v, got, ok)
							}
							num := new(big.Rat).SetInt64(n)
							want := (s.Minimum == nil || num.Cmp(s.Minimum) >= 0) &&
								(s.Maximum == nil || num.Cmp(s.Maximum) <= 0) &&
								(s.ExclusiveMinimum == nil || num.Cmp(s.ExclusiveMinimum) > 0) &&
								(s.ExclusiveMaximum == nil || num.Cmp(s.ExclusiveMaximum) < 0) &&
								(s.MultipleOf == nil || new(big.Rat).Quo(num, s.MultipleOf).IsInt())
							fast := intWithin(n, s)
							if fast && !want {
								t.Errorf("n %d, min %q max %q xmin %q xmax %q multipleOf %q: the short way passes what the long way refuses", n, min, max, xmin, xmax, mul)
							}
							integral := func(b string) bool {
								return b == "" || b == "-3" || b == "0" || b == "2" || b == "5" || b == "1" || b == "3"
							}
							if want && !fast && integral(min) && integral(max) && integral(xmin) && integral(xmax) && (mul == "" || mul == "1" || mul == "3") {
								t.Errorf("n %d, min %q max %q xmin %q xmax %q multipleOf %q: integer bounds met, but the short way is not taken", n, min, max, xmin, xmax, mul)
							}
						}
					}
				}
			}
		}
	}
	for _, v := range []any{json.Number("1.5"), json.Number("1e3"), json.Number("9223372036854775808"), 2.0, "3"} {
		if _, ok := int64Of(v); ok {
			t.Errorf("int64Of(%#v) took the short way", v)
		}
	}
}
