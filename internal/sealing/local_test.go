package sealing

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newSecret(t *testing.T) (string, []byte) {
	t.Helper()
	b64, err := GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return b64, secret
}

func newLocal(t *testing.T, ids ...string) *Local {
	t.Helper()
	var keys []Key
	for _, id := range ids {
		_, secret := newSecret(t)
		k, err := NewKey(id, secret)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	l, err := NewLocal(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLocalSealsAndOpens(t *testing.T) {
	l := newLocal(t, "k1")
	ec := bindingContext("i-1", "b-1")
	for _, plaintext := range [][]byte{[]byte(`{"password":"s3cret"}`), {}, bytes.Repeat([]byte{0xff}, 1<<16)} {
		s, err := l.Seal(t.Context(), plaintext, ec)
		if err != nil {
			t.Fatal(err)
		}
		if s.Alg != AlgLocal || s.KeyID != "k1" || s.Version != Version {
			t.Errorf("sealed as %v, want v%d %s under k1", s, Version, AlgLocal)
		}
		if len(plaintext) > 4 && bytes.Contains(mustJSON(t, s), plaintext[:5]) {
			t.Errorf("the sealed JSON holds the plaintext")
		}
		mustOpen(t, l, roundTrip(t, s), ec, plaintext)
	}
	t.Run("two seals of one value differ", func(t *testing.T) {
		a, _ := l.Seal(t.Context(), []byte("x"), ec)
		b, _ := l.Seal(t.Context(), []byte("x"), ec)
		if bytes.Equal(a.Nonce, b.Nonce) || bytes.Equal(a.Ciphertext, b.Ciphertext) {
			t.Error("same nonce or ciphertext twice")
		}
	})
}

func TestLocalOpensOnlyForTheItemSealedFor(t *testing.T) {
	l := newLocal(t, "k1")
	ec := bindingContext("i-1", "b-1")
	s, err := l.Seal(t.Context(), []byte("s3cret"), ec)
	if err != nil {
		t.Fatal(err)
	}
	others := []struct {
		name string
		ec   map[string]string
	}{
		{"another binding of the instance", bindingContext("i-1", "b-2")},
		{"the same binding id in another instance", bindingContext("i-2", "b-1")},
		{"a record of the instance", map[string]string{"instance_id": "i-1", "record": "b-1"}},
		{"a context with one more entry", map[string]string{"instance_id": "i-1", "binding_id": "b-1", "x": ""}},
		{"a context with one entry less", map[string]string{"instance_id": "i-1"}},
		{"no context", nil},
	}
	for _, o := range others {
		t.Run("a value copied to "+o.name+" fails with ErrWrongContext", func(t *testing.T) {
			mustFail(t, l, s, o.ec, ErrWrongContext)
		})
	}
	t.Run("a copied value whose context digest was rewritten still fails", func(t *testing.T) {
		forged := s
		forged.ContextDigest = contextDigest(bindingContext("i-1", "b-2"))
		mustFail(t, l, forged, bindingContext("i-1", "b-2"), ErrCorrupt)
	})
}

func TestLocalRefusesAlteredValues(t *testing.T) {
	l := newLocal(t, "k0", "k1")
	ec := bindingContext("i-1", "b-1")
	s, err := l.Seal(t.Context(), []byte("s3cret"), ec)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, i int) []byte { b = slices.Clone(b); b[i] ^= 1; return b }
	cases := []struct {
		name   string
		change func(*Sealed)
		want   error
	}{
		{"a flipped ciphertext bit", func(s *Sealed) { s.Ciphertext = flip(s.Ciphertext, 0) }, ErrCorrupt},
		{"a flipped tag bit", func(s *Sealed) { s.Ciphertext = flip(s.Ciphertext, len(s.Ciphertext)-1) }, ErrCorrupt},
		{"a truncated ciphertext", func(s *Sealed) { s.Ciphertext = s.Ciphertext[1:] }, ErrCorrupt},
		{"a flipped nonce bit", func(s *Sealed) { s.Nonce = flip(s.Nonce, 3) }, ErrCorrupt},
		{"another key of the keyring named", func(s *Sealed) { s.KeyID = "k0" }, ErrCorrupt},
		{"a key the keyring lacks named", func(s *Sealed) { s.KeyID = "k9" }, ErrUnknownKey},
		{"the KMS algorithm named", func(s *Sealed) { s.Alg, s.DataKey = AlgKMS, []byte("dk") }, ErrUnknownKey},
		{"a newer version", func(s *Sealed) { s.Version = 2 }, ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name+" fails", func(t *testing.T) {
			v := s
			c.change(&v)
			mustFail(t, l, v, ec, c.want)
		})
	}
}

func TestKeysNeverPrint(t *testing.T) {
	b64, secret := newSecret(t)
	k, err := NewKey("k1", secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, k)
		if strings.Contains(out, b64) || strings.Contains(out, string(secret)) || !strings.Contains(out, "[REDACTED]") {
			t.Errorf("%s prints %q", format, out)
		}
	}
	if out := fmt.Sprintf("%v", k.LogValue()); strings.Contains(out, b64) {
		t.Errorf("LogValue prints %q", out)
	}
}

func TestParseKeys(t *testing.T) {
	b1, s1 := newSecret(t)
	b2, _ := newSecret(t)
	t.Run("a bare key gets an id derived from it, the same every time", func(t *testing.T) {
		a, err := ParseKeys(b1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := ParseKeys(" " + b1 + " ")
		if len(a) != 1 || a[0].ID != b[0].ID || !strings.HasPrefix(a[0].ID, "h") || !bytes.Equal(a[0].secret, s1) {
			t.Fatalf("got %v and %v", a, b)
		}
	})
	t.Run("a list keeps its order, named or not", func(t *testing.T) {
		keys, err := ParseKeys("old:" + b1 + "," + b2)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0].ID != "old" || keys[1].ID != derivedID(mustDecode(t, b2)) {
			t.Fatalf("got %v", keys)
		}
	})
	refused := []struct{ name, value string }{
		{"an empty list", ""},
		{"a key that is not base64", "not base64!"},
		{"a key of 5 bytes", "k:" + base64.StdEncoding.EncodeToString([]byte("short"))},
		{"the same key twice", b1 + "," + b1},
		{"an empty id", ":" + b1},
		{"an id with a slash", "a/b:" + b1},
	}
	for _, c := range refused {
		t.Run(c.name+" is refused", func(t *testing.T) {
			keys, err := ParseKeys(c.value)
			if err == nil {
				_, err = NewLocal(keys...)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), b1) {
				t.Fatalf("the error prints the key: %v", err)
			}
		})
	}
}

func mustDecode(t *testing.T, b64 string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnvironmentKeyRotation(t *testing.T) {
	b1, _ := newSecret(t)
	b2, _ := newSecret(t)
	ec := bindingContext("i-1", "b-1")
	before := mustEnvLocal(t, b1)
	s, err := before.Seal(t.Context(), []byte("s3cret"), ec)
	if err != nil {
		t.Fatal(err)
	}

	after := mustEnvLocal(t, b1+","+b2)
	mustOpen(t, after, s, ec, []byte("s3cret"))
	moved, changed, err := Reseal(t.Context(), after, s, ec)
	if err != nil || !changed {
		t.Fatalf("reseal: changed %v, %v", changed, err)
	}
	if _, current := after.KeyIDs(); moved.KeyID != current || current == s.KeyID {
		t.Fatalf("resealed under %s, want the new key %s", moved.KeyID, current)
	}

	newOnly := mustEnvLocal(t, b2)
	mustOpen(t, newOnly, moved, ec, []byte("s3cret"))
	mustFail(t, newOnly, s, ec, ErrUnknownKey)
	if _, err := newOnly.Rotate(); err == nil {
		t.Error("a keyring from the environment rotated")
	}
}

func mustEnvLocal(t *testing.T, value string) *Local {
	t.Helper()
	keys, err := ParseKeys(value)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func keyFiles(t *testing.T, dir string) (keys, temps []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "."):
			temps = append(temps, e.Name())
		case strings.HasSuffix(e.Name(), keyFileSuffix):
			keys = append(keys, e.Name())
		}
	}
	return keys, temps
}

func TestKeyDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	clk := newClock()
	first, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := keyFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("key files %v, want one", files)
	}
	t.Run("the first use creates a key file with mode 0600 in a directory with mode 0700", func(t *testing.T) {
		info, err := os.Stat(filepath.Join(dir, files[0]))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("key file mode %#o, want 0600", info.Mode().Perm())
		}
		dinfo, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if dinfo.Mode().Perm() != 0o700 {
			t.Errorf("directory mode %#o, want 0700", dinfo.Mode().Perm())
		}
		if _, current := first.KeyIDs(); current+keyFileSuffix != files[0] {
			t.Errorf("current key %s, file %s", current, files[0])
		}
	})

	ec := map[string]string{"instance_id": "i-1", "record": "stack"}
	s, err := first.Seal(t.Context(), []byte("s3cret"), ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a second start reuses the key", func(t *testing.T) {
		again, err := OpenKeyDir(dir, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if ids, current := again.KeyIDs(); len(ids) != 1 || current != s.KeyID {
			t.Fatalf("keys %v current %s, want only %s", ids, current, s.KeyID)
		}
		mustOpen(t, again, s, ec, []byte("s3cret"))
	})
	t.Run("a key file others may read is refused", func(t *testing.T) {
		loose := filepath.Join(t.TempDir(), "keys")
		if _, err := OpenKeyDir(loose, clk.Now); err != nil {
			t.Fatal(err)
		}
		files, _ := keyFiles(t, loose)
		if err := os.Chmod(filepath.Join(loose, files[0]), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenKeyDir(loose, clk.Now); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("got %v, want a refusal that says chmod 600", err)
		}
	})
}

func TestKeyDirectoryRotation(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ec := bindingContext("i-1", "b-1")
	old, err := l.Seal(t.Context(), []byte("old"), ec)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour)
	id, err := l.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if id == old.KeyID {
		t.Fatal("rotate kept the key")
	}

	t.Run("old values still open", func(t *testing.T) {
		mustOpen(t, l, old, ec, []byte("old"))
	})
	fresh, err := l.Seal(t.Context(), []byte("new"), ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("new values seal under the new key", func(t *testing.T) {
		if fresh.KeyID != id {
			t.Fatalf("sealed under %s, want %s", fresh.KeyID, id)
		}
	})
	t.Run("Reseal moves an old value to the new key, once", func(t *testing.T) {
		moved, changed, err := Reseal(t.Context(), l, old, ec)
		if err != nil || !changed || moved.KeyID != id {
			t.Fatalf("reseal: %v under %s, changed %v, want %s", err, moved.KeyID, changed, id)
		}
		mustOpen(t, l, moved, ec, []byte("old"))
		again, changed, err := Reseal(t.Context(), l, moved, ec)
		if err != nil || changed || !slices.Equal(again.Ciphertext, moved.Ciphertext) {
			t.Fatalf("second reseal: changed %v, %v", changed, err)
		}
	})
	t.Run("Reseal refuses a copied value and leaves it as it was", func(t *testing.T) {
		got, changed, err := Reseal(t.Context(), l, old, bindingContext("i-1", "b-2"))
		if !errors.Is(err, ErrWrongContext) || changed || got.KeyID != old.KeyID {
			t.Fatalf("got %v changed %v, %v", got, changed, err)
		}
	})
	t.Run("a restart keeps every key and the new one current", func(t *testing.T) {
		again, err := OpenKeyDir(dir, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if ids, current := again.KeyIDs(); len(ids) != 2 || current != id {
			t.Fatalf("keys %v current %s, want 2 and %s", ids, current, id)
		}
		mustOpen(t, again, old, ec, []byte("old"))
		mustOpen(t, again, fresh, ec, []byte("new"))
	})
	t.Run("a key made while the clock is behind is still the newest", func(t *testing.T) {
		clk.Add(-24 * time.Hour)
		back, err := l.Rotate()
		if err != nil {
			t.Fatal(err)
		}
		if ids, current := l.KeyIDs(); current != back || ids[len(ids)-1] != back {
			t.Fatalf("keys %v current %s, want %s last", ids, current, back)
		}
	})
}

func TestKeyRotationByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	broker, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	id, err := ops.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	ec := bindingContext("i-1", "b-1")
	s, err := ops.Seal(t.Context(), []byte("s3cret"), ec)
	if err != nil || s.KeyID != id {
		t.Fatalf("sealed under %s, want %s: %v", s.KeyID, id, err)
	}
	mustOpen(t, broker, s, ec, []byte("s3cret"))
	if _, current := broker.KeyIDs(); current != id {
		t.Errorf("after reading the directory again, the broker's current key is %s, want %s", current, id)
	}
}

// crash stands for the process dying where it panics.
type crash struct{}

func TestCrashDuringRotationLosesNothing(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ec := bindingContext("i-1", "b-1")
	old, err := l.Seal(t.Context(), []byte("old"), ec)
	if err != nil {
		t.Fatal(err)
	}

	// The new key's file is written and synced, and the process dies
	// before the rename.
	beforeRename = func(string) { panic(crash{}) }
	func() {
		defer func() {
			if r := recover(); r != (crash{}) {
				t.Fatalf("recovered %v, want the simulated crash", r)
			}
		}()
		_, _ = l.Rotate()
	}()
	beforeRename = func(string) {}
	if _, temps := keyFiles(t, dir); len(temps) != 1 {
		t.Fatalf("temporary files %v, want the crashed one", temps)
	}

	restarted, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatalf("start after the crash: %v", err)
	}
	t.Run("after the crash the old key is still current and opens its values", func(t *testing.T) {
		if ids, current := restarted.KeyIDs(); len(ids) != 1 || current != old.KeyID {
			t.Fatalf("keys %v current %s, want only %s", ids, current, old.KeyID)
		}
		mustOpen(t, restarted, old, ec, []byte("old"))
		s, err := restarted.Seal(t.Context(), []byte("after"), ec)
		if err != nil || s.KeyID != old.KeyID {
			t.Fatalf("sealed under %s, want %s: %v", s.KeyID, old.KeyID, err)
		}
	})
	t.Run("rotating again works and keeps the old key", func(t *testing.T) {
		clk.Add(time.Second)
		id, err := restarted.Rotate()
		if err != nil {
			t.Fatal(err)
		}
		again, err := OpenKeyDir(dir, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if ids, current := again.KeyIDs(); len(ids) != 2 || current != id {
			t.Fatalf("keys %v current %s, want 2 and %s", ids, current, id)
		}
		mustOpen(t, again, old, ec, []byte("old"))
	})
	t.Run("a crash after the rename, before any use, loses nothing", func(t *testing.T) {
		// The renamed file is a key like any other; nothing was sealed
		// under it, and the next start makes it current.
		clk.Add(time.Second)
		id, err := restarted.Rotate()
		if err != nil {
			t.Fatal(err)
		}
		again, err := OpenKeyDir(dir, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if _, current := again.KeyIDs(); current != id {
			t.Fatalf("current %s, want %s", current, id)
		}
		mustOpen(t, again, old, ec, []byte("old"))
	})
}

func TestLocalSealsAndOpensWhileRotating(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l, err := OpenKeyDir(dir, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			ec := bindingContext("i-1", fmt.Sprint("b-", w))
			for i := range 50 {
				want := fmt.Appendf(nil, "%d/%d", w, i)
				s, err := l.Seal(context.Background(), want, ec)
				if err == nil {
					var got []byte
					got, err = l.Open(context.Background(), s, ec)
					if err == nil && !bytes.Equal(got, want) {
						err = fmt.Errorf("opened %q, want %q", got, want)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 5 {
		clk.Add(time.Second)
		if _, err := l.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ids, _ := l.KeyIDs(); len(ids) != 6 {
		t.Errorf("keys %v, want 6", ids)
	}
}

// The cost of sealing a binding's credentials on a bind and opening them
// on a fetch, with the local keyring.
func BenchmarkLocal(b *testing.B) {
	l, err := OpenKeyDir(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	credentials := bytes.Repeat([]byte("x"), 256)
	ec := bindingContext("8f1c1f8e-0d7e-4c61-9d35-3c1b0a4d2e11", "2b9d3a44-7c0e-4f0b-a1f1-6e8a3d5c7b90")
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Seal(b.Context(), credentials, ec); err != nil {
				b.Fatal(err)
			}
		}
	})
	s, err := l.Seal(b.Context(), credentials, ec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Open(b.Context(), s, ec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
