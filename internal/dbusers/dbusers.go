// Package dbusers owns the database user of one binding: creating it with the
// privileges its plan allows, and dropping it (with what it owns, or handing
// that to the master user) at unbind, on PostgreSQL and on MySQL or MariaDB.
// It is the core of the Custom::DatabaseUser handler (functions/dbuser):
// every call is idempotent, since CloudFormation may send a request again.
package dbusers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
)

// Privileges is what a binding's user may do, from the plan's binding schema.
type Privileges string

const (
	// Owner: a schema (PostgreSQL) or database (MySQL) of its own, named
	// after the user, with every right on it, and nothing on the
	// application's schema or another binding's.
	Owner Privileges = "owner"
	// ReadWrite: read and write the rows of the application's
	// schema/database; create nothing there.
	ReadWrite Privileges = "readwrite"
	// ReadOnly: read the rows of the application's schema/database.
	ReadOnly Privileges = "readonly"
)

// OnDelete says what happens at unbind to what the user owns.
type OnDelete string

const (
	// Drop drops what the user owns: its schema or database and everything
	// in it.
	Drop OnDelete = "drop"
	// Reassign gives what the user owns to the master user (PostgreSQL), or
	// keeps its database (MySQL, whose objects have no owner), so the data
	// outlives the binding.
	Reassign OnDelete = "reassign"
)

// Password is a user's password; it prints as [REDACTED].
type Password string

func (Password) String() string { return "[REDACTED]" }

// LogValue keeps the password out of log lines.
func (Password) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// User is one binding's database user.
type User struct {
	Name       string
	Password   Password
	Privileges Privileges
}

// Engine makes and drops the users of one database.
type Engine interface {
	// Create makes the user, or brings one that exists to the password and
	// privileges given (a request sent again, or an update).
	Create(ctx context.Context, u User) error
	// Delete drops the user and its sessions; a user already gone is no error.
	Delete(ctx context.Context, name string, mode OnDelete) error
	Close() error
}

// Names are generated, never a user's text: a lower-case letter, then
// letters, digits and underscores, at most 32 (MySQL 5.7's limit; PostgreSQL
// allows 63, MariaDB 80).
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// The application's schema or database: the instance template's DatabaseName
// pattern, short enough to leave room for the group roles' suffixes.
var schemaPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

// UserName derives a binding's user name from its stack and the custom
// resource's logical id: the same request sent again names the same user, and
// each binding stack (a rotation's successor included) has its own.
func UserName(stackID, logicalID string) string {
	sum := sha256.Sum256([]byte(stackID + "\x00" + logicalID))
	return "osb_" + hex.EncodeToString(sum[:12])
}

// Check refuses a user that no statement may name.
func (u User) Check() error {
	if err := CheckName(u.Name); err != nil {
		return err
	}
	switch u.Privileges {
	case Owner, ReadWrite, ReadOnly:
	default:
		return fmt.Errorf("privileges %q: want owner, readwrite or readonly", u.Privileges)
	}
	if u.Password == "" {
		return fmt.Errorf("user %s: the password is empty", u.Name)
	}
	for _, r := range u.Password {
		if r == 0 {
			return fmt.Errorf("user %s: the password holds a NUL byte", u.Name)
		}
	}
	return nil
}

// CheckName refuses a name that is not one UserName could make.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("user name %q: want a lower-case letter, then up to 31 lower-case letters, digits or underscores", name)
	}
	return nil
}

// CheckMode refuses an unknown delete mode.
func CheckMode(mode OnDelete) error {
	switch mode {
	case Drop, Reassign:
		return nil
	}
	return fmt.Errorf("on delete %q: want drop or reassign", mode)
}

func checkSchema(what, name string) error {
	if !schemaPattern.MatchString(name) {
		return fmt.Errorf("%s %q: want a letter, then up to 47 letters, digits or underscores", what, name)
	}
	return nil
}
