// Package cacheusers owns the access strings of a cache's users per binding
// (ElastiCache for Valkey and Redis OSS, AWS::ElastiCache::User's
// AccessString, in the ACL rules Redis 7 and Valkey share): which keys and
// channels a binding's user reaches, and which commands it may run.
package cacheusers

import (
	"fmt"
	"regexp"
	"strings"
)

// Privileges is what a binding's user may do, as for the databases.
type Privileges string

const (
	// Owner: every command but the dangerous ones, on keys and channels
	// under a prefix of its own (<user>:).
	Owner Privileges = "owner"
	// ReadWrite: reads and writes of the application's keys (<app>:), and
	// its channels; no dangerous command.
	ReadWrite Privileges = "readwrite"
	// ReadOnly: reads of the application's keys.
	ReadOnly Privileges = "readonly"
)

// Prefixes are generated or fixed by the operator, never a user's text, and
// hold no glob character: a letter, then letters, digits, _ or -. A
// binding's user is named after its cache's user group and its stack (at
// most 53 characters, services/elasticache-valkey/binding.yaml).
var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// AccessString is the ACL rules of a binding's user: user is the user's name
// (an owner's keys are under "<user>:"), app the application's prefix (its
// keys are under "<app>:"). @dangerous is always denied: it holds FLUSHALL,
// FLUSHDB and KEYS, which ignore key patterns or walk every key, and the
// server's administration.
func AccessString(p Privileges, user, app string) (string, error) {
	for what, v := range map[string]string{"user": user, "application prefix": app} {
		if !prefixPattern.MatchString(v) {
			return "", fmt.Errorf("%s %q: want a lower-case letter, then up to 62 lower-case letters, digits, _ or -", what, v)
		}
	}
	var rules []string
	switch p {
	case Owner:
		rules = []string{"on", "~" + user + ":*", "&" + user + ":*", "+@all", "-@dangerous"}
	case ReadWrite:
		rules = []string{"on", "~" + app + ":*", "&" + app + ":*", "+@all", "-@dangerous"}
	case ReadOnly:
		rules = []string{"on", "~" + app + ":*", "-@all", "+@read", "+@connection", "-@dangerous"}
	default:
		return "", fmt.Errorf("privileges %q: want owner, readwrite or readonly", p)
	}
	return strings.Join(rules, " "), nil
}
