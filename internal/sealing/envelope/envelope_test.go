package envelope

import (
	"bytes"
	"testing"
)

// TestBinaryRefusesWhatItCannotGiveBack: AppendBinary takes only what
// FromBinary gives back byte for byte, and FromBinary refuses a binary
// form cut short, altered, or one AppendBinary would not write.
func TestBinaryRefusesWhatItCannotGiveBack(t *testing.T) {
	const good = `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`
	if _, ok := AppendBinary(nil, []byte(good)); !ok {
		t.Fatal("the good envelope is not taken")
	}
	for name, data := range map[string]string{
		"padding bits not zero":      `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLx=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"base64 without padding":     `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a version's leading zero":   `{"v":01,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"another algorithm":          `{"v":1,"alg":"A128GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a space":                    `{"v":1, "alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a key id JSON would escape": `{"v":1,"alg":"A256GCM","kid":"k<1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a KMS context":              `{"v":1,"alg":"KMS+A256GCM","kid":"k1","dk":"AA==","kec":{"a":"b"},"ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a null nonce":               `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":null,"ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"something after":            good + " ",
		"parameters in clear":        `{"size":3}`,
	} {
		if bin, ok := AppendBinary(nil, []byte(data)); ok {
			t.Errorf("%s: taken (% x)", name, bin)
		}
	}
	bin, _ := AppendBinary(nil, []byte(good))
	for name, bad := range map[string][]byte{
		"cut short":         bin[:len(bin)-1],
		"a byte after":      append(bytes.Clone(bin), 0),
		"another algorithm": append([]byte{1, 9}, bin[2:]...),
		"an unknown flag":   append(append(bytes.Clone(bin[:5]), 4), bin[6:]...),
		"nothing":           nil,
		"a length past it":  {1, 1, 200},
		"a key id with a <": append([]byte{1, 1, 2, 'k', '<'}, bin[5:]...),
	} {
		if out, err := FromBinary(nil, bad); err == nil {
			t.Errorf("%s: read as %s", name, out)
		}
	}
}
