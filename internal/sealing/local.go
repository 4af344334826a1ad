package sealing

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Key is one key of a local keyring: an id and 32 secret bytes. It never
// prints its secret.
type Key struct {
	ID     string
	secret []byte
}

// NewKey returns the key id with secret, which must be 32 bytes.
func NewKey(id string, secret []byte) (Key, error) {
	if id == "" || strings.ContainsAny(id, ",:/\\ \t\r\n") || strings.HasPrefix(id, ".") {
		return Key{}, fmt.Errorf("key id %q: empty, or with a character ids may not hold", id)
	}
	if len(secret) != keySize {
		return Key{}, fmt.Errorf("key %s: %d bytes, not %d", id, len(secret), keySize)
	}
	return Key{ID: id, secret: slices.Clone(secret)}, nil
}

// GenerateSecret returns a new random key secret, base64-encoded as
// ParseKeys reads it.
func GenerateSecret() (string, error) {
	secret := make([]byte, keySize)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(secret), nil
}

func (k Key) String() string { return "key " + k.ID + " [REDACTED]" }

// GoString keeps %#v from printing the secret.
func (k Key) GoString() string { return k.String() }

// LogValue keeps slog from printing the secret.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// ParseKeys reads a keyring from the value of an environment variable:
// keys separated by commas, each the base64 of 32 bytes (its id is then
// derived from it), or "ID:BASE64". The last key is the current one: to
// rotate, append a new key, restart, re-seal, then drop the old key.
func ParseKeys(value string) ([]Key, error) {
	var keys []Key
	for i, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		id, b64, named := strings.Cut(entry, ":")
		if !named {
			b64 = entry
		}
		secret, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("key %d of the list: not base64", i+1)
		}
		if !named {
			id = derivedID(secret)
		}
		k, err := NewKey(id, secret)
		if err != nil {
			return nil, fmt.Errorf("key %d of the list: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// derivedID names a key by a digest of it, so that the same key given
// again has the same id. 48 bits of SHA-256 tell nothing of the key.
func derivedID(secret []byte) string {
	sum := sha256.Sum256(append([]byte("serverless-osb/sealing key id\x00"), secret...))
	return "h" + hex.EncodeToString(sum[:6])
}

// Local seals with AES-256-GCM under the keys of a keyring: the current
// key seals, every key opens. A keyring read from a directory (OpenKeyDir)
// can grow (Rotate), and reads the directory again when it meets a key it
// does not have, so that values sealed by another process after a rotation
// open without a restart.
type Local struct {
	mu      sync.RWMutex
	keys    map[string]cipher.AEAD
	current string
	dir     string // "" for a fixed keyring
	now     func() time.Time
}

var _ Sealer = (*Local)(nil)

// NewLocal returns a Local with a fixed keyring: the last key is the
// current one.
func NewLocal(keys ...Key) (*Local, error) {
	if len(keys) == 0 {
		return nil, errors.New("local sealer: no key")
	}
	l := &Local{keys: map[string]cipher.AEAD{}, now: time.Now}
	for _, k := range keys {
		if err := l.add(k); err != nil {
			return nil, fmt.Errorf("local sealer: %w", err)
		}
	}
	l.current = keys[len(keys)-1].ID
	return l, nil
}

// add puts k in the keyring; the caller holds l.mu or owns l.
func (l *Local) add(k Key) error {
	if _, ok := l.keys[k.ID]; ok {
		return fmt.Errorf("key %s given twice", k.ID)
	}
	aead, err := newAEAD(k.secret)
	if err != nil {
		return fmt.Errorf("key %s: %w", k.ID, err)
	}
	l.keys[k.ID] = aead
	return nil
}

// OpenKeyDir returns a Local whose keyring is the key files in dir, one
// per key ("ID.key", mode 0600, the key in base64); the current key is
// the one with the greatest id, which is the newest. Where dir holds no
// key, it creates dir (mode 0700) and a first key. now stamps new keys'
// ids; nil means time.Now.
func OpenKeyDir(dir string, now func() time.Time) (*Local, error) {
	if now == nil {
		now = time.Now
	}
	l := &Local{keys: map[string]cipher.AEAD{}, dir: dir, now: now}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local sealer: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.reload(); err != nil {
		return nil, fmt.Errorf("local sealer: %w", err)
	}
	if len(l.keys) == 0 {
		if _, err := l.rotate(); err != nil {
			return nil, fmt.Errorf("local sealer: first key: %w", err)
		}
	}
	return l, nil
}

// Rotate adds a new key to a keyring read from a directory and makes it
// the current one. It writes the key's file (a temporary file, fsynced,
// renamed, and the directory fsynced) before any value is sealed under
// it; no other key file is written, so no old key can be lost.
func (l *Local) Rotate() (id string, err error) {
	if l.dir == "" {
		return "", errors.New("rotate: this keyring is fixed (keys from the environment): add a key to the list instead")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.reload(); err != nil {
		return "", fmt.Errorf("rotate: %w", err)
	}
	id, err = l.rotate()
	if err != nil {
		return "", fmt.Errorf("rotate: %w", err)
	}
	return id, nil
}

// rotate writes a new key file and makes it current; the caller holds
// l.mu and has just reloaded.
func (l *Local) rotate() (string, error) {
	secret := make([]byte, keySize)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	k, err := NewKey(newKeyID(l.now(), l.current), secret)
	if err != nil {
		return "", err
	}
	data := []byte(base64.StdEncoding.EncodeToString(secret) + "\n")
	if err := writeFileAtomic(l.dir, k.ID+keyFileSuffix, data); err != nil {
		return "", err
	}
	if err := l.add(k); err != nil {
		return "", err
	}
	l.current = k.ID
	return k.ID, nil
}

// Key ids sort as their keys were made: "k", the time in UTC to the
// nanosecond, and a random suffix that keeps two processes' apart.
const (
	keyFileSuffix = ".key"
	keyIDTime     = "20060102T150405.000000000Z"
)

// newKeyID names a key made at now, after newest (the greatest id so far),
// so that the new key is the current one even if the clock went back.
func newKeyID(now time.Time, newest string) string {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix) // never fails (crypto/rand)
	now = now.UTC()
	if t, ok := keyIDTimeOf(newest); ok && !now.After(t) {
		now = t.Add(time.Nanosecond)
	}
	return "k" + now.Format(keyIDTime) + "-" + hex.EncodeToString(suffix)
}

func keyIDTimeOf(id string) (time.Time, bool) {
	stamp, _, ok := strings.Cut(strings.TrimPrefix(id, "k"), "-")
	if !ok || !strings.HasPrefix(id, "k") {
		return time.Time{}, false
	}
	t, err := time.Parse(keyIDTime, stamp)
	return t, err == nil
}

// reload adds the key files of l.dir that l does not hold yet (it never
// drops a key) and makes the greatest id current. Temporary files that a
// crash left behind are not keys: nothing was sealed under them. The
// caller holds l.mu.
func (l *Local) reload() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, keyFileSuffix) {
			continue
		}
		id := strings.TrimSuffix(name, keyFileSuffix)
		if _, ok := l.keys[id]; ok {
			continue
		}
		k, err := readKeyFile(filepath.Join(l.dir, name), id)
		if err != nil {
			return err
		}
		if err := l.add(k); err != nil {
			return err
		}
	}
	for id := range l.keys {
		if id > l.current {
			l.current = id
		}
	}
	return nil
}

func readKeyFile(path, id string) (Key, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Key{}, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("key file %s: mode %#o lets others read it: chmod 600 it", path, info.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: not base64", path)
	}
	k, err := NewKey(id, secret)
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// beforeRename runs between writing a key's temporary file and renaming
// it; tests make it panic to stand for a crash there.
var beforeRename = func(tmp string) {}

// writeFileAtomic writes name in dir with mode 0600 so that after a crash
// either the whole file is there or none is: a temporary file, fsynced,
// renamed, then the directory fsynced so that the rename is durable.
func writeFileAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	beforeRename(tmp)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// KeyIDs returns the ids of the keyring's keys, sorted, and the current one.
func (l *Local) KeyIDs() (ids []string, current string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for id := range l.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, l.current
}

// CurrentKey names the key that seals now.
func (l *Local) CurrentKey(context.Context) (alg, keyID string, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return AlgLocal, l.current, nil
}

// Seal encrypts plaintext under the current key, bound to ec.
func (l *Local) Seal(_ context.Context, plaintext []byte, ec map[string]string) (Sealed, error) {
	l.mu.RLock()
	id := l.current
	aead := l.keys[id]
	l.mu.RUnlock()
	return sealWith(aead, Sealed{Alg: AlgLocal, KeyID: id}, plaintext, ec)
}

// Open decrypts s if one of the keyring's keys sealed it for ec.
func (l *Local) Open(_ context.Context, s Sealed, ec map[string]string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if s.Alg != AlgLocal {
		return nil, fmt.Errorf("open %v: %w: it was sealed with KMS, and this is the local keyring", s, ErrUnknownKey)
	}
	aead, err := l.key(s.KeyID)
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", s, err)
	}
	if err := checkContext(s, ec); err != nil {
		return nil, err
	}
	return openWith(aead, s, ec)
}

// key returns the key id, reading the directory again if l does not hold
// it: another process may have rotated.
func (l *Local) key(id string) (cipher.AEAD, error) {
	l.mu.RLock()
	aead, ok := l.keys[id]
	l.mu.RUnlock()
	if ok {
		return aead, nil
	}
	if l.dir != "" {
		l.mu.Lock()
		err := l.reload()
		aead, ok = l.keys[id]
		l.mu.Unlock()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("key %s: reading %s again: %w", id, l.dir, err)
		}
		if ok {
			return aead, nil
		}
	}
	return nil, fmt.Errorf("%w: key %s is not in the keyring", ErrUnknownKey, id)
}
