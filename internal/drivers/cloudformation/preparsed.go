package cloudformation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"

	"github.com/serverless-osb/broker/internal/catalog"
)

// PreparsedSuffix names a template's pre-parsed form, beside it: make
// build writes one for each template it bundles (Preparse), and the
// functions read it rather than parse the YAML at start, which was most
// of their start with the deployed catalog.
const PreparsedSuffix = ".json"

// preparsed is a template's pre-parsed form: what the driver reads of it
// (Template without its Body and Path), with the sha256 of the body it
// was read from, so that a stale one is never read.
type preparsed struct {
	Source   string    `json:"source"`
	Template *Template `json:"template"`
}

func templateDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Preparse returns the pre-parsed form of a template's body, or nil when
// it has none: a body that is no usable template (Configure says why),
// or one whose values JSON would not give back as the YAML's are (a
// float written as a whole number), which the functions parse at start.
func Preparse(body []byte) ([]byte, error) {
	t, err := parseTemplate(body)
	if err != nil {
		return nil, nil
	}
	t.Body = ""
	out, err := json.Marshal(preparsed{Source: templateDigest(body), Template: t})
	if err != nil {
		return nil, nil
	}
	back, ok := decodePreparsed(out, body)
	if !ok {
		return nil, nil
	}
	back.Body = ""
	if !reflect.DeepEqual(back, t) {
		return nil, nil
	}
	return out, nil
}

// readPreparsed is the template read from path's pre-parsed form, if it
// is there and was made from body.
func readPreparsed(path string, body []byte) (*Template, bool) {
	data, err := os.ReadFile(path + PreparsedSuffix)
	if err != nil {
		return nil, false
	}
	return decodePreparsed(data, body)
}

func decodePreparsed(data, body []byte) (*Template, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var p preparsed
	if d.Decode(&p) != nil || p.Source != templateDigest(body) || p.Template == nil {
		return nil, false
	}
	t := p.Template
	t.Body = string(body)
	for i := range t.Declared {
		if t.Declared[i].Properties != nil {
			t.Declared[i].Properties = catalog.YAMLNumbers(t.Declared[i].Properties).(map[string]any)
		}
	}
	return t, true
}
