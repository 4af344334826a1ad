package sealing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/serverless-osb/broker/internal/mototest"
)

// kmsFixture is moto's KMS with counted calls.
type kmsFixture struct {
	client  *kms.Client
	counter *mototest.Calls
}

func newKMSFixture(t *testing.T) kmsFixture {
	t.Helper()
	counter := &mototest.Calls{}
	cfg := mototest.Config(t, "eu-west-3")
	cfg.APIOptions = append(cfg.APIOptions, counter.Register)
	return kmsFixture{client: kms.NewFromConfig(cfg), counter: counter}
}

// newKey creates a KMS key and returns its ARN.
func (f kmsFixture) newKey(t *testing.T) string {
	t.Helper()
	out, err := f.client.CreateKey(t.Context(), &kms.CreateKeyInput{Description: aws.String(mototest.Name("sealing"))})
	if err != nil {
		t.Fatalf("create a KMS key: %v", err)
	}
	f.counter.Take()
	return aws.ToString(out.KeyMetadata.Arn)
}

func (f kmsFixture) sealer(t *testing.T, cfg KMSConfig) *KMS {
	t.Helper()
	cfg.Client = f.client
	k, err := NewKMS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// expectCalls checks the KMS calls made since the last check.
func (f kmsFixture) expectCalls(t *testing.T, what string, want map[string]int) {
	t.Helper()
	got := f.counter.Take()
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d %s calls, want %d (all: %v)", what, got[op], op, n, got)
		}
	}
	for op, n := range got {
		if _, ok := want[op]; !ok {
			t.Errorf("%s: %d unexpected %s calls", what, n, op)
		}
	}
}

func TestKMSSealsAndOpens(t *testing.T) {
	f := newKMSFixture(t)
	arn := f.newKey(t)
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared data keys %v", shared), func(t *testing.T) {
			cfg := KMSConfig{KeyID: arn}
			if shared {
				cfg.SharedDataKeys, cfg.SharedContext = true, map[string]string{"broker": "test"}
			}
			k := f.sealer(t, cfg)
			ec := bindingContext("i-1", "b-1")
			s, err := k.Seal(t.Context(), []byte(`{"password":"s3cret"}`), ec)
			if err != nil {
				t.Fatal(err)
			}
			if s.Alg != AlgKMS || s.KeyID != arn || len(s.DataKey) == 0 {
				t.Fatalf("sealed as %v, want %s under %s with a data key", s, AlgKMS, arn)
			}
			s = roundTrip(t, s)
			mustOpen(t, k, s, ec, []byte(`{"password":"s3cret"}`))

			// A cold sealer (another Lambda) opens it through KMS.
			cold := f.sealer(t, cfg)
			mustOpen(t, cold, s, ec, []byte(`{"password":"s3cret"}`))

			t.Run("a value copied to another binding fails with ErrWrongContext", func(t *testing.T) {
				mustFail(t, cold, s, bindingContext("i-1", "b-2"), ErrWrongContext)
				mustFail(t, cold, s, bindingContext("i-2", "b-1"), ErrWrongContext)
			})
			t.Run("a copied value whose context digest was rewritten still fails", func(t *testing.T) {
				other := bindingContext("i-1", "b-2")
				forged := s
				forged.ContextDigest = contextDigest(other)
				mustFail(t, f.sealer(t, cfg), forged, other, ErrCorrupt)
			})
			t.Run("an altered ciphertext fails", func(t *testing.T) {
				altered := s
				altered.Ciphertext = append([]byte{s.Ciphertext[0] ^ 1}, s.Ciphertext[1:]...)
				mustFail(t, cold, altered, ec, ErrCorrupt)
			})
			t.Run("an altered data key fails", func(t *testing.T) {
				altered := s
				altered.DataKey = append([]byte{}, s.DataKey...)
				altered.DataKey[len(altered.DataKey)-1] ^= 1
				mustFail(t, f.sealer(t, cfg), altered, ec, ErrCorrupt)
			})
		})
	}
	t.Run("the local keyring and KMS refuse each other's values", func(t *testing.T) {
		k := f.sealer(t, KMSConfig{KeyID: arn})
		l := newLocal(t, "k1")
		ec := bindingContext("i-1", "b-1")
		fromKMS, err := k.Seal(t.Context(), []byte("x"), ec)
		if err != nil {
			t.Fatal(err)
		}
		fromLocal, err := l.Seal(t.Context(), []byte("x"), ec)
		if err != nil {
			t.Fatal(err)
		}
		mustFail(t, l, fromKMS, ec, ErrUnknownKey)
		mustFail(t, k, fromLocal, ec, ErrUnknownKey)
	})
}

func TestKMSDataKeyCache(t *testing.T) {
	f := newKMSFixture(t)
	arn := f.newKey(t)
	const n = 50
	ec := bindingContext("i-1", "b-1")

	t.Run("seals within the lifetime make one GenerateDataKey, and opens none", func(t *testing.T) {
		clk := newClock()
		k := f.sealer(t, KMSConfig{KeyID: arn, Now: clk.Now})
		var sealed []Sealed
		for i := range n {
			s, err := k.Seal(t.Context(), fmt.Appendf(nil, "secret %d", i), ec)
			if err != nil {
				t.Fatal(err)
			}
			sealed = append(sealed, s)
			clk.Add(DefaultMaxAge / (2 * n))
		}
		f.expectCalls(t, "seals", map[string]int{"GenerateDataKey": 1})
		for i, s := range sealed {
			mustOpen(t, k, s, ec, fmt.Appendf(nil, "secret %d", i))
		}
		f.expectCalls(t, "opens by the sealer", map[string]int{})

		cold := f.sealer(t, KMSConfig{KeyID: arn, Now: clk.Now})
		for i, s := range sealed {
			mustOpen(t, cold, s, ec, fmt.Appendf(nil, "secret %d", i))
		}
		f.expectCalls(t, "opens by another sealer", map[string]int{"Decrypt": 1})

		clk.Add(DefaultMaxAge)
		mustOpen(t, cold, sealed[0], ec, []byte("secret 0"))
		f.expectCalls(t, "an open after the lifetime", map[string]int{"Decrypt": 1})
	})

	t.Run("a data key seals no longer than its lifetime", func(t *testing.T) {
		clk := newClock()
		k := f.sealer(t, KMSConfig{KeyID: arn, Now: clk.Now, MaxAge: time.Minute})
		a, _ := k.Seal(t.Context(), []byte("a"), ec)
		clk.Add(time.Minute - time.Nanosecond)
		b, _ := k.Seal(t.Context(), []byte("b"), ec)
		clk.Add(time.Nanosecond)
		c, err := k.Seal(t.Context(), []byte("c"), ec)
		if err != nil {
			t.Fatal(err)
		}
		f.expectCalls(t, "seals over a lifetime", map[string]int{"GenerateDataKey": 2})
		if string(a.DataKey) != string(b.DataKey) || string(b.DataKey) == string(c.DataKey) {
			t.Error("the data key did not change exactly when its lifetime ended")
		}
	})

	t.Run("a data key seals no more than its use count", func(t *testing.T) {
		k := f.sealer(t, KMSConfig{KeyID: arn, MaxUses: 3})
		for range 7 {
			if _, err := k.Seal(t.Context(), []byte("x"), ec); err != nil {
				t.Fatal(err)
			}
		}
		f.expectCalls(t, "7 seals of at most 3 uses each", map[string]int{"GenerateDataKey": 3})
	})

	t.Run("each item has its own data key unless data keys are shared", func(t *testing.T) {
		k := f.sealer(t, KMSConfig{KeyID: arn})
		shared := f.sealer(t, KMSConfig{KeyID: arn, SharedDataKeys: true, SharedContext: map[string]string{"broker": "test"}})
		for i := range 5 {
			if _, err := k.Seal(t.Context(), []byte("x"), bindingContext("i-1", fmt.Sprint("b-", i))); err != nil {
				t.Fatal(err)
			}
		}
		f.expectCalls(t, "seals for 5 items", map[string]int{"GenerateDataKey": 5})
		var fromShared []Sealed
		for i := range 5 {
			s, err := shared.Seal(t.Context(), []byte("x"), bindingContext("i-1", fmt.Sprint("b-", i)))
			if err != nil {
				t.Fatal(err)
			}
			fromShared = append(fromShared, s)
		}
		f.expectCalls(t, "shared seals for 5 items", map[string]int{"GenerateDataKey": 1})
		cold := f.sealer(t, KMSConfig{KeyID: arn, SharedDataKeys: true, SharedContext: map[string]string{"broker": "test"}})
		for i, s := range fromShared {
			mustOpen(t, cold, s, bindingContext("i-1", fmt.Sprint("b-", i)), []byte("x"))
		}
		f.expectCalls(t, "opening 5 items sealed under one shared data key", map[string]int{"Decrypt": 1})
	})

	t.Run("the cache holds at most MaxCached data keys", func(t *testing.T) {
		k := f.sealer(t, KMSConfig{KeyID: arn, MaxCached: 2})
		for i := range 5 {
			if _, err := k.Seal(t.Context(), []byte("x"), bindingContext("i-1", fmt.Sprint("b-", i))); err != nil {
				t.Fatal(err)
			}
		}
		k.mu.Lock()
		seal, open := len(k.sealKeys), len(k.openKeys)
		k.mu.Unlock()
		if seal > 2 || open > 2 {
			t.Errorf("%d data keys cached to seal and %d to open, want at most 2 each", seal, open)
		}
		f.counter.Take()
	})

	t.Run("seals that miss the cache together make one GenerateDataKey", func(t *testing.T) {
		k := f.sealer(t, KMSConfig{KeyID: arn})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				_, err := k.Seal(context.Background(), []byte("x"), ec)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		f.expectCalls(t, "8 concurrent seals", map[string]int{"GenerateDataKey": 1})
	})
}

func TestKMSKeyChange(t *testing.T) {
	f := newKMSFixture(t)
	oldARN, newARN := f.newKey(t), f.newKey(t)
	ec := bindingContext("i-1", "b-1")

	before := f.sealer(t, KMSConfig{KeyID: oldARN})
	old, err := before.Seal(t.Context(), []byte("old"), ec)
	if err != nil {
		t.Fatal(err)
	}

	after := f.sealer(t, KMSConfig{KeyID: newARN})
	t.Run("values sealed under the former key still open", func(t *testing.T) {
		mustOpen(t, after, old, ec, []byte("old"))
	})
	t.Run("new values seal under the new key", func(t *testing.T) {
		s, err := after.Seal(t.Context(), []byte("new"), ec)
		if err != nil || s.KeyID != newARN {
			t.Fatalf("sealed under %s, want %s: %v", s.KeyID, newARN, err)
		}
	})
	t.Run("Reseal moves a value to the new key, once", func(t *testing.T) {
		moved, changed, err := Reseal(t.Context(), after, old, ec)
		if err != nil || !changed || moved.KeyID != newARN {
			t.Fatalf("reseal: %v under %s, changed %v", err, moved.KeyID, changed)
		}
		mustOpen(t, f.sealer(t, KMSConfig{KeyID: newARN}), moved, ec, []byte("old"))
		_, changed, err = Reseal(t.Context(), after, moved, ec)
		if err != nil || changed {
			t.Fatalf("second reseal: changed %v, %v", changed, err)
		}
	})
	t.Run("a value naming a key KMS does not have fails with ErrUnknownKey", func(t *testing.T) {
		gone := old
		gone.KeyID = oldARN[:strings.LastIndex(oldARN, "/")+1] + "00000000-0000-4000-8000-000000000000"
		mustFail(t, after, gone, ec, ErrUnknownKey)
	})
	t.Run("a copied value is not resealed", func(t *testing.T) {
		_, changed, err := Reseal(t.Context(), after, old, bindingContext("i-9", "b-1"))
		if !errors.Is(err, ErrWrongContext) || changed {
			t.Fatalf("changed %v, %v", changed, err)
		}
	})
}

func TestKMSAliasRetargeted(t *testing.T) {
	f := newKMSFixture(t)
	oldARN, newARN := f.newKey(t), f.newKey(t)
	alias := "alias/" + mototest.Name("broker")
	if _, err := f.client.CreateAlias(t.Context(), &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(oldARN)}); err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	k := f.sealer(t, KMSConfig{KeyID: alias, Now: clk.Now})
	ec := bindingContext("i-1", "b-1")
	old, err := k.Seal(t.Context(), []byte("old"), ec)
	if err != nil {
		t.Fatal(err)
	}
	if old.KeyID != oldARN {
		t.Fatalf("sealed under %s, want the alias's key %s", old.KeyID, oldARN)
	}
	if _, err := f.client.UpdateAlias(t.Context(), &kms.UpdateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(newARN)}); err != nil {
		t.Fatal(err)
	}
	f.counter.Take()

	if _, kid, err := k.CurrentKey(t.Context()); err != nil || kid != oldARN {
		t.Fatalf("within the lifetime, current key %s, %v; want the cached %s", kid, err, oldARN)
	}
	f.expectCalls(t, "CurrentKey within the lifetime", map[string]int{})
	clk.Add(DefaultMaxAge)
	moved, changed, err := Reseal(t.Context(), k, old, ec)
	if err != nil || !changed || moved.KeyID != newARN {
		t.Fatalf("reseal after the alias moved: %v under %s, changed %v; want %s", err, moved.KeyID, changed, newARN)
	}
	mustOpen(t, k, old, ec, []byte("old"))
	mustOpen(t, k, moved, ec, []byte("old"))
}
