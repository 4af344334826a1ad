package sealing

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// KMSClient is the part of the KMS API that the KMS sealer calls: IAM
// must allow kms:GenerateDataKey and kms:Decrypt on the broker's key, and
// kms:DescribeKey where the key is not named by its ARN (CurrentKey, used
// by Reseal, resolves it).
type KMSClient interface {
	GenerateDataKey(context.Context, *kms.GenerateDataKeyInput, ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(context.Context, *kms.DecryptInput, ...func(*kms.Options)) (*kms.DecryptOutput, error)
	DescribeKey(context.Context, *kms.DescribeKeyInput, ...func(*kms.Options)) (*kms.DescribeKeyOutput, error)
}

var _ KMSClient = (*kms.Client)(nil)

// Defaults of KMSConfig's bounds.
const (
	DefaultMaxAge    = 5 * time.Minute
	DefaultMaxUses   = 10_000
	DefaultMaxCached = 1_000
)

// KMSConfig configures a KMS sealer.
type KMSConfig struct {
	// Client calls KMS.
	Client KMSClient
	// KeyID is the KMS key that seals: its ARN (best: no lookup), id,
	// alias name or alias ARN.
	KeyID string
	// SharedDataKeys chooses what the KMS encryption context of a data key
	// is. False (the default): the item's own encryption context, so that
	// KMS itself refuses a data key copied to another item, CloudTrail
	// records which item each Decrypt opened, and key policies can use
	// kms:EncryptionContext conditions; a cached data key then seals
	// again only for the same item (as the AWS Encryption SDK's caching
	// does). True: SharedContext, so that one cached data key seals the
	// values of every item for MaxAge or MaxUses; each value is still
	// bound to its item by AES-GCM, and a copied one still fails with
	// ErrWrongContext.
	SharedDataKeys bool
	// SharedContext is the KMS encryption context of shared data keys,
	// for example {"broker": stackName}; required with SharedDataKeys.
	SharedContext map[string]string
	// MaxAge bounds how long a data key is used to seal, and how long a
	// decrypted one is kept to open. Zero means DefaultMaxAge.
	MaxAge time.Duration
	// MaxUses bounds how many values one data key seals. Zero means
	// DefaultMaxUses.
	MaxUses int
	// MaxCached bounds how many data keys are cached, for sealing and for
	// opening each. Zero means DefaultMaxCached.
	MaxCached int
	// Now tells the time; nil means time.Now.
	Now func() time.Time
}

// KMS seals by envelope encryption under a KMS key: a data key from
// GenerateDataKey (AES_256) encrypts the value with AES-256-GCM, and the
// envelope keeps the data key as KMS encrypted it and the ARN of the KMS
// key. Data keys are cached, so that most seals and opens call no KMS API;
// a cached data key seals at most MaxUses values, for at most MaxAge.
type KMS struct {
	cfg KMSConfig

	// gen serializes GenerateDataKey calls, so that seals that miss the
	// cache together make one call.
	gen sync.Mutex

	mu         sync.Mutex
	sealKeys   map[string]*sealKey // by canonical KMS encryption context
	openKeys   map[string]*openKey // by canonical KMS context and encrypted data key
	currentARN string
	currentAt  time.Time
}

var _ Sealer = (*KMS)(nil)

type sealKey struct {
	aead      cipher.AEAD
	encrypted []byte
	keyARN    string
	created   time.Time
	uses      int
}

type openKey struct {
	aead    cipher.AEAD
	created time.Time
}

// NewKMS returns a KMS sealer.
func NewKMS(cfg KMSConfig) (*KMS, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("kms sealer: no client")
	case cfg.KeyID == "":
		return nil, errors.New("kms sealer: no key id")
	case cfg.SharedDataKeys && len(cfg.SharedContext) == 0:
		return nil, errors.New("kms sealer: shared data keys need a SharedContext")
	case cfg.MaxAge < 0 || cfg.MaxUses < 0 || cfg.MaxCached < 0:
		return nil, errors.New("kms sealer: negative bound")
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxUses == 0 {
		cfg.MaxUses = DefaultMaxUses
	}
	if cfg.MaxCached == 0 {
		cfg.MaxCached = DefaultMaxCached
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.SharedContext = maps.Clone(cfg.SharedContext)
	return &KMS{cfg: cfg, sealKeys: map[string]*sealKey{}, openKeys: map[string]*openKey{}}, nil
}

// Seal encrypts plaintext under a data key of the configured KMS key,
// bound to ec.
func (k *KMS) Seal(ctx context.Context, plaintext []byte, ec map[string]string) (Sealed, error) {
	kec := ec
	if k.cfg.SharedDataKeys {
		kec = k.cfg.SharedContext
	}
	dk, err := k.sealKey(ctx, kec)
	if err != nil {
		return Sealed{}, fmt.Errorf("seal: %w", err)
	}
	s := Sealed{Alg: AlgKMS, KeyID: dk.keyARN, DataKey: dk.encrypted}
	if k.cfg.SharedDataKeys {
		s.KMSContext = maps.Clone(kec)
	}
	return sealWith(dk.aead, s, plaintext, ec)
}

// sealKey returns a data key to seal one value for the KMS encryption
// context kec, counting the use: a cached one if it is young and little
// used enough, else a new one from KMS.
func (k *KMS) sealKey(ctx context.Context, kec map[string]string) (*sealKey, error) {
	ck := string(canonical(kec))
	if dk := k.takeCached(ck); dk != nil {
		return dk, nil
	}
	k.gen.Lock()
	defer k.gen.Unlock()
	if dk := k.takeCached(ck); dk != nil { // another seal generated it meanwhile
		return dk, nil
	}
	out, err := k.cfg.Client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             aws.String(k.cfg.KeyID),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: kec,
	})
	if err != nil {
		return nil, fmt.Errorf("generate a data key with KMS key %s: %w", k.cfg.KeyID, err)
	}
	aead, err := newAEAD(out.Plaintext)
	clear(out.Plaintext)
	if err != nil {
		return nil, fmt.Errorf("data key from KMS key %s: %w", k.cfg.KeyID, err)
	}
	now := k.cfg.Now()
	dk := &sealKey{aead: aead, encrypted: out.CiphertextBlob, keyARN: aws.ToString(out.KeyId), created: now, uses: 1}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.sealKeys) >= k.cfg.MaxCached {
		evict(k.sealKeys, func(e *sealKey) time.Time { return e.created }, now, k.cfg.MaxAge)
	}
	k.sealKeys[ck] = dk
	// A value this key sealed opens without a call to KMS.
	if len(k.openKeys) >= k.cfg.MaxCached {
		evict(k.openKeys, func(e *openKey) time.Time { return e.created }, now, k.cfg.MaxAge)
	}
	k.openKeys[openCacheKey(dk.keyARN, kec, dk.encrypted)] = &openKey{aead: aead, created: now}
	if dk.keyARN != k.currentARN {
		k.currentARN, k.currentAt = dk.keyARN, now
	}
	return dk, nil
}

// takeCached returns the cached data key for ck, counting the use, if it
// may still seal.
func (k *KMS) takeCached(ck string) *sealKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	dk := k.sealKeys[ck]
	if dk == nil || dk.uses >= k.cfg.MaxUses || !k.cfg.Now().Before(dk.created.Add(k.cfg.MaxAge)) {
		return nil
	}
	dk.uses++
	return dk
}

// evict makes room in a cache: it drops the entries older than maxAge,
// or, if none is, the oldest. The caller holds k.mu.
func evict[E any](cache map[string]E, created func(E) time.Time, now time.Time, maxAge time.Duration) {
	var oldest string
	var oldestAt time.Time
	dropped := false
	for key, e := range cache {
		at := created(e)
		if !now.Before(at.Add(maxAge)) {
			delete(cache, key)
			dropped = true
			continue
		}
		if oldest == "" || at.Before(oldestAt) {
			oldest, oldestAt = key, at
		}
	}
	if !dropped && oldest != "" {
		delete(cache, oldest)
	}
}

// openCacheKey keys a decrypted data key by all that KMS checked when it
// decrypted it: the KMS key, the encryption context and the encrypted key.
func openCacheKey(keyARN string, kec map[string]string, encrypted []byte) string {
	return string(appendField(appendField(canonical(kec), []byte(keyARN)), encrypted))
}

// Open decrypts s if it was sealed for ec under a KMS key that lets this
// sealer decrypt its data key.
func (k *KMS) Open(ctx context.Context, s Sealed, ec map[string]string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if s.Alg != AlgKMS {
		return nil, fmt.Errorf("open %v: %w: it was sealed with a local key, and this is the KMS sealer", s, ErrUnknownKey)
	}
	if err := checkContext(s, ec); err != nil {
		return nil, err
	}
	kec := ec
	if s.KMSContext != nil {
		kec = s.KMSContext
	}
	aead, err := k.openKey(ctx, s, kec)
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", s, err)
	}
	return openWith(aead, s, ec)
}

// openKey returns the data key of s: cached, or decrypted by KMS.
func (k *KMS) openKey(ctx context.Context, s Sealed, kec map[string]string) (cipher.AEAD, error) {
	ck := openCacheKey(s.KeyID, kec, s.DataKey)
	k.mu.Lock()
	ok := k.openKeys[ck]
	k.mu.Unlock()
	if ok != nil && k.cfg.Now().Before(ok.created.Add(k.cfg.MaxAge)) {
		return ok.aead, nil
	}
	out, err := k.cfg.Client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    s.DataKey,
		EncryptionContext: kec,
		KeyId:             aws.String(s.KeyID), // KMS checks that this key encrypted it
	})
	if err != nil {
		return nil, decryptError(err)
	}
	aead, err := newAEAD(out.Plaintext)
	clear(out.Plaintext)
	if err != nil {
		return nil, fmt.Errorf("data key from KMS: %w", err)
	}
	now := k.cfg.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.openKeys) >= k.cfg.MaxCached {
		evict(k.openKeys, func(e *openKey) time.Time { return e.created }, now, k.cfg.MaxAge)
	}
	k.openKeys[ck] = &openKey{aead: aead, created: now}
	return aead, nil
}

// decryptError sorts KMS's refusals: the context digest matched, so a data
// key KMS does not authenticate was altered; a key KMS does not know, or
// that did not encrypt this data key, is an unknown key. Anything else
// (throttling, permissions, a disabled key) is returned as it is.
func decryptError(err error) error {
	var invalid *types.InvalidCiphertextException
	var notFound *types.NotFoundException
	var incorrect *types.IncorrectKeyException
	switch {
	case errors.As(err, &invalid):
		return fmt.Errorf("KMS refused the data key: %w (%v)", ErrCorrupt, err)
	case errors.As(err, &notFound), errors.As(err, &incorrect):
		return fmt.Errorf("%w (%v)", ErrUnknownKey, err)
	}
	return fmt.Errorf("decrypt the data key with KMS: %w", err)
}

// CurrentKey names the KMS key that seals now, by its ARN: the configured
// one if it is a key ARN, else the key it resolves to (DescribeKey, or the
// last data key generated), looked up again after MaxAge. When it changes,
// cached data keys of the former key no longer seal.
func (k *KMS) CurrentKey(ctx context.Context) (alg, keyID string, err error) {
	if isKeyARN(k.cfg.KeyID) {
		return AlgKMS, k.cfg.KeyID, nil
	}
	now := k.cfg.Now()
	k.mu.Lock()
	arn, at := k.currentARN, k.currentAt
	k.mu.Unlock()
	if arn != "" && now.Before(at.Add(k.cfg.MaxAge)) {
		return AlgKMS, arn, nil
	}
	out, err := k.cfg.Client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(k.cfg.KeyID)})
	if err != nil {
		return "", "", fmt.Errorf("describe KMS key %s: %w", k.cfg.KeyID, err)
	}
	if out.KeyMetadata == nil || aws.ToString(out.KeyMetadata.Arn) == "" {
		return "", "", fmt.Errorf("describe KMS key %s: no ARN in the answer", k.cfg.KeyID)
	}
	arn = aws.ToString(out.KeyMetadata.Arn)
	k.mu.Lock()
	defer k.mu.Unlock()
	if arn != k.currentARN {
		// The alias points at another key now: seal under it.
		for ck, dk := range k.sealKeys {
			if dk.keyARN != arn {
				delete(k.sealKeys, ck)
			}
		}
	}
	k.currentARN, k.currentAt = arn, now
	return AlgKMS, arn, nil
}

func isKeyARN(id string) bool {
	return strings.HasPrefix(id, "arn:") && strings.Contains(id, ":key/")
}
