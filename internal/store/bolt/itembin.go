package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/jsonenc"
	"github.com/serverless-osb/broker/internal/sealing/envelope"
)

// The operation, instance, binding and record items, written by every
// provision, bind and Task, are stored in a binary form: a first byte binMark (JSON's is '{', so an
// item of either form reads back), then each field that is not zero as
// a one-byte tag and its value: a string or raw JSON as its length
// (uvarint) and bytes, an integer as a varint, a time as its Unix
// nanoseconds (varint), true as the tag alone. A demo provision's
// operation is 551 bytes of JSON and about 260 of this, its instance 611
// and about 330, a binding 949 and about 720 (its sealed credentials
// kept as they were). Layout 6 has short forms (formUUID, formHex,
// formSealed): ids and fingerprints in their bytes, sealed values (a
// binding's credentials, a record) in sealing's binary form: the demo
// provision's operation is about 190 bytes, its instance 235, its sealed
// record 222 where it was 327. That keeps more items in a 4 KiB page:
// fewer splits and a shallower tree (TestWherePagesGo). An item with anything that JSON would not give
// back alike (invalid UTF-8, a time out of the nanoseconds' range or not
// in UTC, raw JSON not valid and compact, an instance's metadata, a
// binding's credentials in clear or endpoints) is written as JSON, as
// before.
const binMark = 0x01

// itemBin appends an item's binary form; ok is false when it left the
// item to JSON.
type itemBin interface {
	appendBin(b []byte) (out []byte, ok bool)
}

// itemBinRead reads an item of its own type from its binary form, after
// binMark.
type itemBinRead interface {
	readBin(data []byte) error
}

var (
	_ itemBin     = operationItem{}
	_ itemBinRead = (*operationItem)(nil)
	_ itemBin     = instanceItem{}
	_ itemBinRead = (*instanceItem)(nil)
	_ itemBin     = bindingItem{}
	_ itemBinRead = (*bindingItem)(nil)
	_ itemBin     = resourceItem{}
	_ itemBinRead = (*resourceItem)(nil)
)

// bw writes one item's fields; ok turns false at the first value it does
// not take.
type bw struct {
	b  []byte
	ok bool
}

// The forms a field may take besides its bytes, in the high bits of its
// tag (every tag is below formHex). A canonical lowercase UUID (the
// broker's operation ids, the catalog's ids, Cloud Foundry's GUIDs) is
// its 16 bytes; lowercase hex of at least minHex digits (the requests'
// fingerprints) is its bytes, as a length and the bytes. Layout 6 has
// them; a string of any other text is its bytes, as before.
const (
	formUUID = 0x80
	formHex  = 0x40
	formMask = formUUID | formHex
	minHex   = 32
	// formSealed is a raw field's form, a sealed value's (a record's, a
	// binding's credentials) in the binary form envelope.AppendBinary
	// writes, about two thirds of its JSON: its length, then the form.
	formSealed = formUUID | formHex
)

func (w *bw) str(tag byte, s string) {
	if s == "" {
		return
	}
	if id, ok := uuidBytes(s); ok {
		w.b = append(append(w.b, tag|formUUID), id[:]...)
		return
	}
	if len(s) >= minHex && len(s)%2 == 0 && lowerHex(s) {
		w.b = binary.AppendUvarint(append(w.b, tag|formHex), uint64(len(s)/2))
		for i := 0; i < len(s); i += 2 {
			hi, _ := hexDigit(s[i]) // lowerHex: digits only
			lo, _ := hexDigit(s[i+1])
			w.b = append(w.b, hi<<4|lo)
		}
		return
	}
	if !utf8.ValidString(s) {
		w.ok = false
		return
	}
	w.b = append(w.b, tag)
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *bw) raw(tag byte, v json.RawMessage) {
	if len(v) == 0 {
		return
	}
	if v[0] == '{' && w.sealed(tag, v) {
		return
	}
	if !validCompact(v) {
		w.ok = false
		return
	}
	w.b = append(w.b, tag)
	w.b = binary.AppendUvarint(w.b, uint64(len(v)))
	w.b = append(w.b, v...)
}

// sealed writes v in the binary form of a sealed value (formSealed) when
// it is one as the sealing store writes it (envelope.AppendBinary), and
// says whether it did: its length, then the form.
func (w *bw) sealed(tag byte, v json.RawMessage) bool {
	at := len(w.b)
	b, ok := envelope.AppendBinary(append(w.b, tag|formSealed, 0), v)
	if !ok {
		w.b = b[:at]
		return false
	}
	n := len(b) - at - 2
	if n < 0x80 {
		b[at+1] = byte(n) // its length in the one byte kept for it
		w.b = b
		return true
	}
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	b = slices.Insert(b, at+2, l[1:k]...)
	copy(b[at+1:], l[:k])
	w.b = b
	return true
}

// validCompact reports whether v is one JSON value, valid and compact, in
// one pass (jsonenc's Scanner), where a whitespace scan and json.Valid
// took two; both forms' writers take a raw value only then. A value the
// Scanner does not take (one nested deeper than it reads) goes to
// jsonenc.Marshal, which compacts it.
func validCompact(v []byte) bool {
	s := jsonenc.NewScanner(v, jsonenc.ScanOptions{})
	_, ok := s.Skip()
	return ok && s.End()
}

func (w *bw) int(tag byte, n int64) {
	if n != 0 {
		w.b = binary.AppendVarint(append(w.b, tag), n)
	}
}

func (w *bw) flag(tag byte, v bool) {
	if v {
		w.b = append(w.b, tag)
	}
}

func (w *bw) boolPtr(tag byte, v *bool) {
	if v == nil {
		return
	}
	b := byte(0)
	if *v {
		b = 1
	}
	w.b = append(w.b, tag, b)
}

// maintenanceInfo writes m's version under tag version, even when empty
// (it marks the info), and its description under description.
func (w *bw) maintenanceInfo(version, description byte, m *maintenanceInfoItem) {
	if m == nil {
		return
	}
	if !utf8.ValidString(m.Version) {
		w.ok = false
	}
	w.b = append(w.b, version)
	w.b = binary.AppendUvarint(w.b, uint64(len(m.Version)))
	w.b = append(w.b, m.Version...)
	w.str(description, m.Description)
}

// minBinTime and maxBinTime bound the times UnixNano holds.
var (
	minBinTime = time.Unix(0, -1<<63).UTC()
	maxBinTime = time.Unix(0, 1<<63-1).UTC()
)

func (w *bw) time(tag byte, t time.Time) {
	if t.IsZero() {
		return
	}
	if _, offset := t.Zone(); offset != 0 || t.Before(minBinTime) || t.After(maxBinTime) {
		w.ok = false
		return
	}
	w.b = binary.AppendVarint(append(w.b, tag), t.UnixNano())
}

// br reads one item's fields.
type br struct {
	b   []byte
	err error
	// whole is the item copied into one string at the first string field
	// read: every string field is a part of it, one allocation for them all
	// rather than one each (data is the whole item, which b is the rest of).
	// A part keeps the whole item in memory: whoever keeps a field for long
	// (the plan index) clones it. The text of a field in a short form
	// (formUUID, formHex) is written after the item in the same buffer,
	// text, made with room for them: strings.Builder hands out what it holds
	// as a string without copying, and never changes bytes it wrote.
	whole string
	text  strings.Builder
	data  []byte
	// form is the form of the field whose tag was read last.
	form byte
}

// newBR reads the binary item data.
func newBR(data []byte) br { return br{b: data, data: data} }

var errBinItem = errors.New("truncated binary item")

// tag reads a field's tag, and keeps its form (formUUID, formHex, or 0)
// for str; any other reader refuses a form.
func (r *br) tag() (byte, bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, false
	}
	t := r.b[0]
	r.b = r.b[1:]
	r.form = t & formMask
	return t &^ formMask, true
}

// plain fails the item when its field is in a string's form: only str
// reads one.
func (r *br) plain() bool {
	if r.form != 0 {
		r.err = errBinItem
		return false
	}
	return true
}

func (r *br) bytes() []byte {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || uint64(len(r.b)-k) < n {
		r.err = errBinItem
		return nil
	}
	v := r.b[k : k+int(n)]
	r.b = r.b[k+int(n):]
	return v
}

func (r *br) str() string {
	if r.form != 0 {
		return r.short()
	}
	v := r.bytes()
	if len(v) == 0 {
		return ""
	}
	r.copyWhole()
	end := len(r.data) - len(r.b) // v ends where b now starts
	return r.whole[end-len(v) : end]
}

// copyWhole copies the item into whole, once, with room after it for the
// text of the fields in a short form: a short form's text is at most
// 36/17 of its bytes (a UUID's), so at most 9/4 of the item's.
func (r *br) copyWhole() {
	if r.whole != "" {
		return
	}
	r.text.Grow(len(r.data) + len(r.data)*9/4)
	r.text.Write(r.data)
	r.whole = r.text.String()
}

// short reads a string field in its short form, as its text.
func (r *br) short() string {
	var v []byte
	switch r.form {
	case formUUID:
		if len(r.b) < 16 {
			r.err = errBinItem
			return ""
		}
		v, r.b = r.b[:16], r.b[16:]
	case formHex:
		if v = r.bytes(); len(v)*2 < minHex {
			r.err = errBinItem
			return ""
		}
	default:
		r.err = errBinItem
		return ""
	}
	r.copyWhole()
	start := r.text.Len()
	if r.form == formUUID {
		var b [36]byte
		appendUUIDText(b[:0], v)
		r.text.Write(b[:])
	} else {
		const digits = "0123456789abcdef"
		for _, c := range v {
			r.text.WriteByte(digits[c>>4])
			r.text.WriteByte(digits[c&0xf])
		}
	}
	return r.text.String()[start:]
}

// raw copies: bbolt's values live only as long as their transaction. A
// sealed value in its binary form (formSealed) comes back as its JSON.
func (r *br) raw() json.RawMessage {
	if r.form == formSealed {
		v := r.bytes()
		if r.err != nil {
			return nil
		}
		out, err := envelope.FromBinary(nil, v)
		if err != nil {
			r.err = err
			return nil
		}
		return out
	}
	if !r.plain() {
		return nil
	}
	v := r.bytes()
	if v == nil {
		return nil
	}
	return append(json.RawMessage(nil), v...)
}

func (r *br) int() int64 {
	if !r.plain() {
		return 0
	}
	n, k := binary.Varint(r.b)
	if k <= 0 {
		r.err = errBinItem
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *br) boolPtr() *bool {
	if !r.plain() || len(r.b) == 0 {
		r.err = errBinItem
		return nil
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return &v
}

func (r *br) time() time.Time { return time.Unix(0, r.int()).UTC() }

// The operation's tags; a tag's meaning never changes once written.
const (
	opID byte = iota + 1
	opInstanceID
	opBindingID
	opKind
	opState
	opDescription
	opDetail
	opFingerprint
	opAsync
	opPlanID
	opTarget // its fields follow, up to opTargetEnd
	opTargetPlanID
	opTargetParameters
	opTargetContext
	opTargetMaintenanceVersion // a maintenance info, with its version
	opTargetMaintenanceDescription
	opTargetPlanDigest
	opTargetEnd
	opRetryAfter
	opInstanceUsable
	opUpdateRepeatable
	opCreatedAt
	opUpdatedAt
	opNextCheckAt
	opFinishedAt
	opExpiresAt
	opOutageSince
	opOutageAttempts
	opOutageInBegin
)

func (it operationItem) appendBin(b []byte) ([]byte, bool) {
	w := bw{b: append(b, binMark), ok: true}
	w.str(opID, it.ID)
	w.str(opInstanceID, it.InstanceID)
	w.str(opBindingID, it.BindingID)
	w.str(opKind, it.Kind)
	w.str(opState, it.State)
	w.str(opDescription, it.Description)
	w.str(opDetail, it.Detail)
	w.str(opFingerprint, it.Fingerprint)
	w.flag(opAsync, it.Async)
	w.str(opPlanID, it.PlanID)
	if t := it.Target; t != nil {
		w.b = append(w.b, opTarget)
		w.str(opTargetPlanID, t.PlanID)
		w.raw(opTargetParameters, t.Parameters)
		w.raw(opTargetContext, t.Context)
		w.maintenanceInfo(opTargetMaintenanceVersion, opTargetMaintenanceDescription, t.MaintenanceInfo)
		w.str(opTargetPlanDigest, t.PlanDigest)
		w.b = append(w.b, opTargetEnd)
	}
	w.int(opRetryAfter, it.RetryAfter)
	w.boolPtr(opInstanceUsable, it.InstanceUsable)
	w.boolPtr(opUpdateRepeatable, it.UpdateRepeatable)
	w.time(opCreatedAt, it.CreatedAt)
	w.time(opUpdatedAt, it.UpdatedAt)
	w.time(opNextCheckAt, it.NextCheckAt)
	w.time(opFinishedAt, it.FinishedAt)
	w.time(opExpiresAt, it.ExpiresAt)
	w.time(opOutageSince, it.OutageSince)
	w.int(opOutageAttempts, int64(it.OutageAttempts))
	w.flag(opOutageInBegin, it.OutageInBegin)
	return w.b, w.ok
}

func (it *operationItem) readBin(data []byte) error {
	r := newBR(data)
	for {
		tag, ok := r.tag()
		if !ok {
			return r.err
		}
		switch tag {
		case opID:
			it.ID = r.str()
		case opInstanceID:
			it.InstanceID = r.str()
		case opBindingID:
			it.BindingID = r.str()
		case opKind:
			it.Kind = r.str()
		case opState:
			it.State = r.str()
		case opDescription:
			it.Description = r.str()
		case opDetail:
			it.Detail = r.str()
		case opFingerprint:
			it.Fingerprint = r.str()
		case opAsync:
			it.Async = r.plain()
		case opPlanID:
			it.PlanID = r.str()
		case opTarget:
			r.plain()
			it.Target = &targetItem{}
		case opTargetPlanID, opTargetParameters, opTargetContext, opTargetMaintenanceVersion,
			opTargetMaintenanceDescription, opTargetPlanDigest:
			t := it.Target
			if t == nil {
				return errors.New("a target's field outside a target")
			}
			switch tag {
			case opTargetPlanID:
				t.PlanID = r.str()
			case opTargetParameters:
				t.Parameters = r.raw()
			case opTargetContext:
				t.Context = r.raw()
			case opTargetMaintenanceVersion:
				t.MaintenanceInfo = &maintenanceInfoItem{Version: r.str()}
			case opTargetMaintenanceDescription:
				if t.MaintenanceInfo == nil {
					return errors.New("a maintenance info's description without its version")
				}
				t.MaintenanceInfo.Description = r.str()
			case opTargetPlanDigest:
				t.PlanDigest = r.str()
			}
		case opTargetEnd:
			r.plain()
		case opRetryAfter:
			it.RetryAfter = r.int()
		case opInstanceUsable:
			it.InstanceUsable = r.boolPtr()
		case opUpdateRepeatable:
			it.UpdateRepeatable = r.boolPtr()
		case opCreatedAt:
			it.CreatedAt = r.time()
		case opUpdatedAt:
			it.UpdatedAt = r.time()
		case opNextCheckAt:
			it.NextCheckAt = r.time()
		case opFinishedAt:
			it.FinishedAt = r.time()
		case opExpiresAt:
			it.ExpiresAt = r.time()
		case opOutageSince:
			it.OutageSince = r.time()
		case opOutageAttempts:
			it.OutageAttempts = int(r.int())
		case opOutageInBegin:
			it.OutageInBegin = r.plain()
		default:
			return errors.New("an unknown field: a newer broker wrote it")
		}
	}
}

// The instance's tags; a tag's meaning never changes once written.
const (
	instID byte = iota + 1
	instServiceID
	instPlanID
	instOrganizationGUID
	instSpaceGUID
	instParameters
	instContext
	instMaintenanceVersion // a maintenance info, with its version
	instMaintenanceDescription
	instPlanDigest
	instDashboardURL
	instState
	instOp
	instLastOp
	instBindingOps
	instFingerprint
	instVersion
	instCreatedAt
	instUpdatedAt
)

func (it instanceItem) appendBin(b []byte) ([]byte, bool) {
	if len(it.Metadata.Labels) > 0 || len(it.Metadata.Attributes) > 0 {
		return b, false
	}
	w := bw{b: append(b, binMark), ok: true}
	w.str(instID, it.ID)
	w.str(instServiceID, it.ServiceID)
	w.str(instPlanID, it.PlanID)
	w.str(instOrganizationGUID, it.OrganizationGUID)
	w.str(instSpaceGUID, it.SpaceGUID)
	w.raw(instParameters, it.Parameters)
	w.raw(instContext, it.Context)
	w.maintenanceInfo(instMaintenanceVersion, instMaintenanceDescription, it.MaintenanceInfo)
	w.str(instPlanDigest, it.PlanDigest)
	w.str(instDashboardURL, it.DashboardURL)
	w.str(instState, it.State)
	w.str(instOp, it.Op)
	w.str(instLastOp, it.LastOp)
	w.int(instBindingOps, int64(it.BindingOps))
	w.str(instFingerprint, it.Fingerprint)
	w.int(instVersion, it.Version)
	w.time(instCreatedAt, it.CreatedAt)
	w.time(instUpdatedAt, it.UpdatedAt)
	return w.b, w.ok
}

func (it *instanceItem) readBin(data []byte) error {
	r := newBR(data)
	for {
		tag, ok := r.tag()
		if !ok {
			return r.err
		}
		switch tag {
		case instID:
			it.ID = r.str()
		case instServiceID:
			it.ServiceID = r.str()
		case instPlanID:
			it.PlanID = r.str()
		case instOrganizationGUID:
			it.OrganizationGUID = r.str()
		case instSpaceGUID:
			it.SpaceGUID = r.str()
		case instParameters:
			it.Parameters = r.raw()
		case instContext:
			it.Context = r.raw()
		case instMaintenanceVersion:
			it.MaintenanceInfo = &maintenanceInfoItem{Version: r.str()}
		case instMaintenanceDescription:
			if it.MaintenanceInfo == nil {
				return errors.New("a maintenance info's description without its version")
			}
			it.MaintenanceInfo.Description = r.str()
		case instPlanDigest:
			it.PlanDigest = r.str()
		case instDashboardURL:
			it.DashboardURL = r.str()
		case instState:
			it.State = r.str()
		case instOp:
			it.Op = r.str()
		case instLastOp:
			it.LastOp = r.str()
		case instBindingOps:
			it.BindingOps = int(r.int())
		case instFingerprint:
			it.Fingerprint = r.str()
		case instVersion:
			it.Version = r.int()
		case instCreatedAt:
			it.CreatedAt = r.time()
		case instUpdatedAt:
			it.UpdatedAt = r.time()
		default:
			return errors.New("an unknown field: a newer broker wrote it")
		}
	}
}

// The binding's tags; a tag's meaning never changes once written.
const (
	bindInstanceID byte = iota + 1
	bindID
	bindServiceID
	bindPlanID
	bindAppGUID
	bindBindResource
	bindParameters
	bindContext
	bindState
	bindSealed
	bindPredecessorID
	bindExpiresAt
	bindRenewBefore
	bindOp
	bindLastOp
	bindFingerprint
	bindVersion
	bindCreatedAt
	bindUpdatedAt
)

func (it bindingItem) appendBin(b []byte) ([]byte, bool) {
	if len(it.Credentials) > 0 || len(it.Endpoints) > 0 {
		return b, false
	}
	w := bw{b: append(b, binMark), ok: true}
	w.str(bindInstanceID, it.InstanceID)
	w.str(bindID, it.ID)
	w.str(bindServiceID, it.ServiceID)
	w.str(bindPlanID, it.PlanID)
	w.str(bindAppGUID, it.AppGUID)
	w.raw(bindBindResource, it.BindResource)
	w.raw(bindParameters, it.Parameters)
	w.raw(bindContext, it.Context)
	w.str(bindState, it.State)
	w.raw(bindSealed, it.Sealed)
	w.str(bindPredecessorID, it.PredecessorID)
	w.time(bindExpiresAt, it.ExpiresAt)
	w.time(bindRenewBefore, it.RenewBefore)
	w.str(bindOp, it.Op)
	w.str(bindLastOp, it.LastOp)
	w.str(bindFingerprint, it.Fingerprint)
	w.int(bindVersion, it.Version)
	w.time(bindCreatedAt, it.CreatedAt)
	w.time(bindUpdatedAt, it.UpdatedAt)
	return w.b, w.ok
}

func (it *bindingItem) readBin(data []byte) error {
	r := newBR(data)
	for {
		tag, ok := r.tag()
		if !ok {
			return r.err
		}
		switch tag {
		case bindInstanceID:
			it.InstanceID = r.str()
		case bindID:
			it.ID = r.str()
		case bindServiceID:
			it.ServiceID = r.str()
		case bindPlanID:
			it.PlanID = r.str()
		case bindAppGUID:
			it.AppGUID = r.str()
		case bindBindResource:
			it.BindResource = r.raw()
		case bindParameters:
			it.Parameters = r.raw()
		case bindContext:
			it.Context = r.raw()
		case bindState:
			it.State = r.str()
		case bindSealed:
			it.Sealed = r.raw()
		case bindPredecessorID:
			it.PredecessorID = r.str()
		case bindExpiresAt:
			it.ExpiresAt = r.time()
		case bindRenewBefore:
			it.RenewBefore = r.time()
		case bindOp:
			it.Op = r.str()
		case bindLastOp:
			it.LastOp = r.str()
		case bindFingerprint:
			it.Fingerprint = r.str()
		case bindVersion:
			it.Version = r.int()
		case bindCreatedAt:
			it.CreatedAt = r.time()
		case bindUpdatedAt:
			it.UpdatedAt = r.time()
		default:
			return errors.New("an unknown field: a newer broker wrote it")
		}
	}
}

// The record's tags; a tag's meaning never changes once written.
const (
	resInstanceID byte = iota + 1
	resName
	resData // absent: null, as JSON wrote a nil record's data
	resUpdatedAt
)

func (it resourceItem) appendBin(b []byte) ([]byte, bool) {
	if it.Data != nil && len(it.Data) == 0 {
		return b, false // JSON refuses it: its error stays JSON's
	}
	w := bw{b: append(b, binMark), ok: true}
	w.str(resInstanceID, it.InstanceID)
	w.str(resName, it.Name)
	w.raw(resData, it.Data)
	w.time(resUpdatedAt, it.UpdatedAt)
	return w.b, w.ok
}

func (it *resourceItem) readBin(data []byte) error {
	r := newBR(data)
	it.Data = json.RawMessage("null")
	for {
		tag, ok := r.tag()
		if !ok {
			return r.err
		}
		switch tag {
		case resInstanceID:
			it.InstanceID = r.str()
		case resName:
			it.Name = r.str()
		case resData:
			it.Data = r.raw()
		case resUpdatedAt:
			it.UpdatedAt = r.time()
		default:
			return errors.New("an unknown field: a newer broker wrote it")
		}
	}
}

// lowerHex says whether s is lowercase hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if _, ok := hexDigit(s[i]); !ok {
			return false
		}
	}
	return true
}
