package app

import (
	"bytes"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/broker"
)

// What ops prints of a stored record may hold a target's words, and a
// record stored before the broker cleaned them may still hold what a
// terminal acts on (escape sequences, bidi controls): every byte of ops'
// text and JSON answers, and of its errors, goes through broker.CleanText.

// cleanWriter cleans text on its way to w. A character cut between two
// writes waits for the rest; flush writes what is left.
type cleanWriter struct {
	w    io.Writer
	tail []byte
}

func newCleanWriter(w io.Writer) *cleanWriter { return &cleanWriter{w: w} }

func (c *cleanWriter) Write(p []byte) (int, error) {
	buf := append(c.tail, p...)
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	c.tail = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(c.w, broker.CleanText(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes a character left incomplete at the end (as U+FFFD).
func (c *cleanWriter) flush() error {
	if len(c.tail) == 0 {
		return nil
	}
	_, err := io.WriteString(c.w, broker.CleanText(string(c.tail)))
	c.tail = nil
	return err
}

// cleanJSON is a JSON document as encoding/json wrote it, with no control
// character left in its strings: an escaped one (\u001b, \b, \f, \r) is
// dropped with its escape, a raw one (DEL, C1, the bidi controls, which
// encoding/json writes as they are) by broker.CleanText. \n and \t stay.
func cleanJSON(doc []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(doc))
	for i := 0; i < len(doc); {
		if doc[i] != '\\' || i+1 >= len(doc) {
			j := i + 1
			for j < len(doc) && doc[j] != '\\' {
				j++
			}
			out.WriteString(broker.CleanText(string(doc[i:j])))
			i = j
			continue
		}
		switch doc[i+1] {
		case 'b', 'f', 'r':
			i += 2
			continue
		case 'u':
			if i+6 <= len(doc) {
				if r, err := strconv.ParseUint(string(doc[i+2:i+6]), 16, 32); err == nil && r != '\n' && r != '\t' && broker.CleanText(string(rune(r))) == "" {
					i += 6
					continue
				}
			}
		}
		out.Write(doc[i : i+2])
		i += 2
	}
	return out.Bytes()
}

// cleanError is err with its message cleaned: errors.Is and As still see
// err.
type cleanError struct{ err error }

func (e cleanError) Error() string { return broker.CleanText(e.err.Error()) }
func (e cleanError) Unwrap() error { return e.err }

func cleanErr(err error) error {
	if err == nil {
		return nil
	}
	return cleanError{err}
}
