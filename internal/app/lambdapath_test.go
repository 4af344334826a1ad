package app

import "testing"

func TestEncodePath(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"an encoded path is unchanged", "/v2/service_instances/a%FFb/service_bindings/%C3%A9", "/v2/service_instances/a%FFb/service_bindings/%C3%A9"},
		{"a plain path is unchanged", "/v2/service_instances/6b1f3c2e-8d4a", "/v2/service_instances/6b1f3c2e-8d4a"},
		{"a decoded question mark stays in the path", "/v2/service_instances/a?b", "/v2/service_instances/a%3Fb"},
		{"a decoded hash stays in the path", "/v2/service_instances/a#b", "/v2/service_instances/a%23b"},
		{"a control character is escaped", "/v2/service_instances/a\nb", "/v2/service_instances/a%0Ab"},
		{"a space is escaped", "/v2/service_instances/a b", "/v2/service_instances/a%20b"},
		{"a bare percent is escaped", "/v2/service_instances/100%", "/v2/service_instances/100%25"},
		{"a percent before one hex digit is escaped", "/v2/service_instances/%A", "/v2/service_instances/%25A"},
		{"non-ASCII bytes are escaped", "/v2/service_instances/é", "/v2/service_instances/%C3%A9"},
		{"the replacement character is escaped", "/v2/service_instances/\uFFFD", "/v2/service_instances/%EF%BF%BD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := encodePath(tc.in); got != tc.want {
				t.Fatalf("encodePath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
