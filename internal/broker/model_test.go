package broker

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestCredentialsNeverPrint(t *testing.T) {
	c := Credentials{"password": "hunter2"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "credentials", c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%v %s %+v", c, c, c), buf.String()} {
		if strings.Contains(out, "hunter2") {
			t.Fatalf("credentials printed: %s", out)
		}
	}
}

func TestFingerprintIgnoresKeyOrderAndSpacing(t *testing.T) {
	a := InstanceFingerprint("s", "p", "o", "sp", []byte(`{"a":1,"b":[1,2]}`), nil)
	b := InstanceFingerprint("s", "p", "o", "sp", []byte(`{ "b":[1,2], "a":1 }`), nil)
	if a != b {
		t.Fatal("the same parameters fingerprint differently")
	}
	if a == InstanceFingerprint("s", "p", "o", "sp", []byte(`{"a":2,"b":[1,2]}`), nil) {
		t.Fatal("other parameters fingerprint the same")
	}
	if InstanceFingerprint("s", "p", "o", "sp", nil, nil) != InstanceFingerprint("s", "p", "o", "sp", []byte(`{}`), nil) {
		t.Fatal("absent and empty parameters differ")
	}
	if InstanceFingerprint("s", "p", "o", "sp", nil, &MaintenanceInfo{Version: "1.0.0"}) == InstanceFingerprint("s", "p", "o", "sp", nil, nil) {
		t.Fatal("maintenance_info is not part of the fingerprint")
	}
}
