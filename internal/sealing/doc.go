// Package sealing owns how the broker seals secrets at rest (binding
// credentials, and any other secret a driver returns) before they reach a
// store, and opens them again to answer a bind or a fetch. It knows no
// store and no OSB type: a caller seals bytes for an item named by an
// encryption context, such as {"instance_id": I, "binding_id": B} or
// {"instance_id": I, "record": name}, and stores the Sealed it gets back.
//
// # Sealers
//
// [Sealer] is the port; two adapters implement it:
//   - [Local]: AES-256-GCM under a local keyring, for `make run`: key files
//     in a directory, each created with mode 0600 ([OpenKeyDir]), or keys
//     given in an environment variable ([ParseKeys], [NewLocal]).
//   - [KMS]: envelope encryption under a KMS key, deployed: a data key from
//     GenerateDataKey encrypts the value with AES-256-GCM; the envelope
//     keeps the data key as KMS encrypted it. Data keys are cached with a
//     bounded lifetime and use count, so that most seals and opens call no
//     KMS API ([KMSConfig]).
//
// # Format
//
// A [Sealed] marshals to JSON: the format version, the algorithm
// ([AlgLocal] or [AlgKMS]), the id of the key that sealed it (a local
// key's id, or the KMS key's ARN), for KMS the encrypted data key, a short
// digest of the encryption context, a random 12-byte nonce and the
// ciphertext with its tag. [Parse] reads it back and refuses other formats.
//
// # Guarantees
//
//   - The encryption context and the envelope's header are AES-GCM's
//     additional data: a value opens only for the item it was sealed for.
//     A value copied to another item fails with [ErrWrongContext]; an
//     altered one with [ErrCorrupt]; one sealed by a key the sealer does
//     not have with [ErrUnknownKey]. Open never returns wrong plaintext.
//   - With KMS, the data key is also bound by KMS's encryption context:
//     the item's own context by default, or a fixed one with
//     SharedDataKeys (then only AES-GCM binds the item).
//   - Every value records the key that sealed it, and a sealer opens with
//     every key it has, so a new key never makes old values unreadable.
//   - Keys never print: [Key] and the sealers' values redact them.
//
// # Key rotation
//
// Whatever the key, rotation is: make a new key current (new values seal
// under it, old values still open), then re-seal every stored value with
// [Reseal], which opens a value with whatever key sealed it and seals it
// under the current key, reporting whether it changed; values that were
// not re-sealed (a crash, a failure) still open with their old key, so
// re-sealing again is safe. Only when a re-seal pass reports no change and
// no failure may the old key go.
//
// Local key files: [Local.Rotate] (for an `ops` command) writes a new
// key file (temporary file, fsync, rename, directory fsync) and never
// rewrites an old one, so a crash at any point loses no key: a leftover
// temporary file is ignored, and nothing was sealed under it. A running
// broker seals under its current key until it restarts, and opens values
// sealed under a newer key by reading the directory again. After the
// re-seal pass, old key files may be deleted.
//
// Local keys in the environment: append a new key to the list (the last
// one is current), restart, re-seal, then remove the old key.
//
// KMS: point the broker at the new key (a new key ARN, or retarget the
// alias it uses; KMS's own yearly rotation of a key's material needs
// nothing, since KMS keeps the old material). Values sealed under the old
// key open as long as the functions may still call kms:Decrypt on it:
// keep that permission, and the key enabled, until a re-seal pass reports
// no change. Cached data keys of the old key stop sealing after MaxAge at
// most.
//
// # Limits
//
// Random 96-bit nonces: a key should seal fewer than 2^32 values, which
// the broker's volumes never approach; KMS data keys seal at most MaxUses.
package sealing
