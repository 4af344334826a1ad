package broker

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLength bounds the ids a platform sends (instance, binding, service,
// plan ids), in bytes. The spec recommends 255 characters or fewer; every
// platform sends GUIDs. Counting bytes keeps keys, and the names drivers
// derive from ids, well inside DynamoDB's 1024-byte sort key.
const MaxIDLength = 255

// MaxKeyLength bounds what a Store keys an item by (ids, and the names of
// driver resources, which may embed an id).
const MaxKeyLength = 512

// MaxRequestBytes bounds a request body. What a request carries
// (parameters, context, bind_resource, maintenance_info) is stored in the
// instance or binding item and, for an update, in the operation item, as
// JSON text: so every item stays under DynamoDB's 400 KB item limit, with
// room for the broker's own fields, and every store accepts the same
// requests.
const MaxRequestBytes = 256 << 10

// IDRule says, for a user, what CheckID accepts.
const IDRule = "ids must be 1 to 255 bytes of valid UTF-8 with no control characters and no U+FFFD"

// CheckID says why v cannot be an id, or returns nil. An id is stored in a
// key and, as JSON, in the item's value: a string that JSON cannot carry
// faithfully (invalid UTF-8 becomes U+FFFD when encoded) would be keyed
// under one id and recorded under another, so the broker could never find
// its own record again. Every id the broker stores passes this check, at
// the API (a 400 before anything is written) and in every Store.
//
// U+FFFD, the replacement character, is refused too: it is what invalid
// UTF-8 becomes when a proxy decodes a path leniently (API Gateway does not
// say what it does with such bytes), so two different invalid ids could
// arrive as one valid id and reach one instance.
func CheckID(v string) error {
	if len(v) > MaxIDLength {
		return fmt.Errorf("it is longer than %d bytes", MaxIDLength)
	}
	if strings.ContainsRune(v, utf8.RuneError) && utf8.ValidString(v) {
		return fmt.Errorf("it contains U+FFFD, the replacement character (bytes that were not UTF-8 on the way)")
	}
	return checkKey(v)
}

// checkKey is CheckID without the platform's length limit: what a Store
// needs of every key.
func checkKey(v string) error {
	switch {
	case v == "":
		return fmt.Errorf("it is empty")
	case len(v) > MaxKeyLength:
		return fmt.Errorf("it is longer than %d bytes", MaxKeyLength)
	case !utf8.ValidString(v):
		return fmt.Errorf("it is not valid UTF-8 (once percent-decoded)")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("it contains the control character %U", r)
		}
	}
	return nil
}
