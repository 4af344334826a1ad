package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// decodeCatalog reads GET /v2/catalog: only If-None-Match, so that a
// platform can revalidate its copy against the catalog's strong ETag and
// get 304.
func decodeCatalog(r *http.Request) (string, error) {
	return r.Header.Get("If-None-Match"), nil
}

// catalogAnswer is the catalog as GET /v2/catalog answers it.
type catalogAnswer struct {
	etag string
	json json.RawMessage // nil: the platform's copy is current (304)
}

// readCatalog is the call of GET /v2/catalog: the catalog is loaded once,
// at start-up.
func (h *handlers) readCatalog(_ context.Context, ifNoneMatch string) (catalogAnswer, error) {
	etag := h.catalog.ETag()
	if matchesETag(ifNoneMatch, etag) {
		return catalogAnswer{etag: etag}, nil
	}
	return catalogAnswer{etag: etag, json: h.catalog.JSON()}, nil
}

func encodeCatalog(c catalogAnswer, header http.Header) (int, any) {
	header.Set("ETag", c.etag)
	header.Set("Cache-Control", "no-cache")
	if c.json == nil {
		return http.StatusNotModified, nil
	}
	return http.StatusOK, c.json
}

// matchesETag implements If-None-Match's weak comparison (RFC 9110 13.1.2).
func matchesETag(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, candidate := range strings.Split(header, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || strings.TrimPrefix(candidate, "W/") == strings.TrimPrefix(etag, "W/") {
			return true
		}
	}
	return false
}
