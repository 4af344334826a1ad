package api

import (
	"net/http"
	"strings"
)

// getCatalog handles GET /v2/catalog, with a strong ETag so a platform can
// revalidate with If-None-Match and get 304.
func (h *handlers) getCatalog(w http.ResponseWriter, r *http.Request) {
	etag := h.catalog.ETag()
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if matchesETag(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h.catalog.JSON())
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
