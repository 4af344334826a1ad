package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// PreparsedSuffix names a catalog's pre-parsed form, beside it: make build
// bundles catalog.yaml.json with catalog.yaml (Preparse), and LoadChecked
// reads it instead of parsing the YAML, which was most of what is left of
// loading a checked catalog.
const PreparsedSuffix = ".json"

// preparsed is the pre-parsed form: the YAML's values as JSON, and the
// digest of the YAML it was made from, so that a stale one is never read.
type preparsed struct {
	Source  string `json:"source_sha256"`
	Catalog any    `json:"catalog"`
}

// Preparse returns the pre-parsed form of the YAML catalog data (named
// source in errors): what LoadChecked reads, from the file named by the
// catalog's path and PreparsedSuffix, instead of parsing data.
func Preparse(source string, data []byte) ([]byte, error) {
	ck := &checker{source: source, owners: map[ownerKey]string{}}
	doc, ok := ck.decode(data)
	if !ok {
		return nil, ck.err()
	}
	return jsonenc.Marshal(preparsed{Source: digest(data), Catalog: doc})
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readPreparsed returns the values of the pre-parsed form of data, from
// path, if it is there and was made from data.
func readPreparsed(path string, data []byte) (any, bool) {
	p, err := decodePreparsed(path)
	if err != nil || p.Source != digest(data) {
		return nil, false
	}
	return YAMLNumbers(p.Catalog), true
}

func decodePreparsed(path string) (preparsed, error) {
	var p preparsed
	body, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if v, ok := preparsedKeys(body); ok {
		// The short way (jsonenc.DecodeAny: what encoding/json with
		// UseNumber gives, at a fraction of its cost at every cold start).
		p.Source, _ = v["source_sha256"].(string)
		p.Catalog = v["catalog"]
	} else {
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&p); err != nil {
			p.Catalog = nil
		}
	}
	if p.Catalog == nil {
		return p, fmt.Errorf("%s is no pre-parsed catalog: build the bundles from the catalog with make build", filepath.Base(path))
	}
	return p, nil
}

// preparsedKeys is the pre-parsed form read the short way, when that
// takes it and it holds the keys Preparse writes alone, as it writes them
// (a string digest): what encoding/json reads into a preparsed. Anything
// else is left to encoding/json, by its own rules.
func preparsedKeys(body []byte) (map[string]any, bool) {
	v, ok := jsonenc.DecodeAny(body)
	m, isMap := v.(map[string]any)
	if !ok || !isMap {
		return nil, false
	}
	for k, e := range m {
		if _, isStr := e.(string); k != "catalog" && (k != "source_sha256" || !isStr && e != nil) {
			return nil, false
		}
	}
	return m, true
}

// PreparsedDigest is the sha256 (hex) of the YAML catalog that the
// pre-parsed form at path was made from: what the stack's synthesis
// compares with the catalog it deploys, as the bundles ship no YAML.
func PreparsedDigest(path string) (string, error) {
	p, err := decodePreparsed(path)
	return p.Source, err
}

// Digest is the sha256 (hex) of a YAML catalog's bytes, as its pre-parsed
// form records it (PreparsedDigest).
func Digest(data []byte) string { return digest(data) }

// loadPreparsedAlone is LoadChecked's catalog when there is no YAML at
// path: its pre-parsed form alone, which must be there.
func loadPreparsedAlone(path string) (*Catalog, error) {
	p, err := decodePreparsed(path + PreparsedSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read catalog: neither %s nor its pre-parsed form %s is there: build the bundles with make build", path, filepath.Base(path)+PreparsedSuffix)
	}
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	ck := &checker{source: filepath.Base(path), owners: map[ownerKey]string{}, lazy: true}
	return ck.catalog(YAMLNumbers(p.Catalog))
}

// YAMLNumbers turns the json.Numbers of a value decoded with UseNumber
// into what yaml.v3 decodes the same numbers into: int, uint64 beyond it,
// float64 for the rest (a pre-parsed file reads back as its YAML).
func YAMLNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = YAMLNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = YAMLNumbers(e)
		}
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 0); err == nil {
			return int(n)
		}
		if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// loadPreparsed is LoadChecked's parse of data, read from path: its
// pre-parsed form when there is one made from data, else the YAML.
func loadPreparsed(path string, data []byte) (*Catalog, error) {
	ck := &checker{source: filepath.Base(path), owners: map[ownerKey]string{}, lazy: true}
	doc, ok := readPreparsed(path+PreparsedSuffix, data)
	if !ok {
		if doc, ok = ck.decode(data); !ok {
			return nil, ck.err()
		}
	}
	return ck.catalog(doc)
}

// PreparsedYAML is the catalog of the pre-parsed form at path as a YAML
// document (its values as JSON, which YAML reads): a catalog that Load
// reads as the one it was made from, for a build from a bundle, which
// ships no YAML (the sandbox rebuilds an asset's bootstraps for its
// machine from it).
func PreparsedYAML(path string) ([]byte, error) {
	p, err := decodePreparsed(path)
	if err != nil {
		return nil, err
	}
	return jsonenc.Marshal(p.Catalog)
}
