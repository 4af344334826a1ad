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
