// Package logtest reads log lines in tests, strictly: encoding/json keeps
// the last of two equal keys without a word, so a duplicate key would pass
// unseen.
package logtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode decodes one JSON log line into a map, refusing a line that is not
// one JSON object, or that repeats a key within an object at any depth.
func Decode(line []byte) (map[string]any, error) {
	if err := checkKeys(json.NewDecoder(bytes.NewReader(line))); err != nil {
		return nil, fmt.Errorf("%w in %s", err, line)
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w: %s", err, line)
	}
	return v, nil
}

// Lines decodes every line of a log, as Decode does.
func Lines(log string) ([]map[string]any, error) {
	var out []map[string]any
	for line := range strings.Lines(strings.TrimSpace(log)) {
		v, err := Decode([]byte(line))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// checkKeys reads one JSON value and fails on an object that repeats a key,
// or on anything after the value.
func checkKeys(dec *json.Decoder) error {
	if err := value(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}

func value(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q", path+key)
			}
			seen[key] = true
			if err := value(dec, path+key+"."); err != nil {
				return err
			}
		}
		_, err = dec.Token() // }
		return err
	case json.Delim('['):
		for dec.More() {
			if err := value(dec, path); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
		return err
	}
	return nil
}
