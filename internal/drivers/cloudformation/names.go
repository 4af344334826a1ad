package cloudformation

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// Stack-name lengths. An instance's stack name is kept to 40 characters:
// CloudFormation derives the physical names it generates (queues, users,
// tables) from the stack name, and a FIFO queue's generated name must leave
// room for ".fifo" within SQS's 80 (services/README.md).
const (
	instanceNameBudget = 40
	hashChars          = 10
	bindingSlugMax     = 24
)

// InstanceStackName is the stack of an instance: the prefix, a readable slug
// of the id and 10 hex digits of its SHA-256, so that ids that slug alike
// (or not at all) still get distinct names. It is stable: a pure function
// of the prefix and the id.
func InstanceStackName(prefix, instanceID string) string {
	return prefix + "-" + idPart(instanceID, instanceNameBudget-len(prefix)-2-hashChars)
}

// BindingStackName is the stack of a binding: its instance's stack name, "-b-"
// and the binding's own slug and hash (at most 128 characters in all).
func BindingStackName(prefix, instanceID, bindingID string) string {
	return InstanceStackName(prefix, instanceID) + "-b-" + idPart(bindingID, bindingSlugMax)
}

// idPart is "<slug>-<hash>", or "<hash>" when the id has nothing to slug.
func idPart(id string, slugMax int) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:hashChars]
	if s := slug(id, slugMax); s != "" {
		return s + "-" + h
	}
	return h
}

// slug lowercases ASCII letters, keeps ASCII digits, turns every run of
// anything else into one hyphen, and trims hyphens from both ends.
func slug(id string, limit int) string {
	var b strings.Builder
	dash := false
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		default:
			dash = b.Len() > 0
			continue
		}
		if dash {
			b.WriteByte('-')
			dash = false
		}
		b.WriteRune(r)
	}
	s := b.String()
	if len(s) > limit {
		s = strings.TrimRight(s[:limit], "-")
	}
	return s
}

// token derives a ClientRequestToken: a retried call of the same request
// sends the same token, so CloudFormation does not repeat it. It matches
// [a-zA-Z0-9][-a-zA-Z0-9]* and is 44 characters long.
func token(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "osb-" + hex.EncodeToString(sum[:20])
}

// Tag keys. Stack tags propagate to the stack's resources, so a resource
// can be traced to its instance, binding and plan.
const (
	TagInstanceID       = "serverless-osb:instance-id"
	TagBindingID        = "serverless-osb:binding-id"
	TagServiceID        = "serverless-osb:service-id"
	TagPlanID           = "serverless-osb:plan-id"
	TagPlanName         = "serverless-osb:plan-name"
	TagServiceName      = "serverless-osb:service-name"
	TagOrganizationGUID = "serverless-osb:organization-guid"
	TagSpaceGUID        = "serverless-osb:space-guid"
	TagInstanceName     = "serverless-osb:instance-name"
	TagNamespace        = "serverless-osb:namespace"
	// TagSubaccountID is SAP BTP's subaccount, its context's subaccount_id:
	// with the organization and space, what a bill is split by.
	TagSubaccountID = "serverless-osb:subaccount-id"
	TagAppGUID      = "serverless-osb:app-guid"
	// TagOperationID names the operation that created the stack: it tells
	// the broker's own stack from another one of the same name (the
	// leftover of an earlier instance with the same id).
	TagOperationID = "serverless-osb:operation-id"
)

// maxTagValue is CloudFormation's limit on a tag value, in characters.
const maxTagValue = 256

// tagValue fits v to what AWS tags accept everywhere a stack tag
// propagates: letters, digits, spaces and _ . : / = + - @, at most 256
// characters (Unicode letters, digits and spaces count). Anything else
// becomes '_'.
func tagValue(v string) string {
	var b strings.Builder
	n := 0
	for _, r := range v {
		if n == maxTagValue {
			break
		}
		if !tagRune(r) {
			r = '_'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

func tagRune(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return false
	case strings.ContainsRune("_.:/=+-@", r):
		return true
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Zs, r)
}

// platformContext is what the stack tags take from an OSB context object
// (Cloud Foundry's and Kubernetes' profiles).
type platformContext struct {
	OrganizationGUID string `json:"organization_guid"`
	SpaceGUID        string `json:"space_guid"`
	InstanceName     string `json:"instance_name"`
	Namespace        string `json:"namespace"`
	SubaccountID     string `json:"subaccount_id"`
}

// instanceTags tags an instance's stack; bindingTags adds a binding's.
func instanceTags(c broker.Change, createdBy string) []types.Tag {
	ctx := decodeContext(c.Instance.Context)
	if c.Operation.Target != nil && len(c.Operation.Target.Context) > 0 {
		ctx = decodeContext(c.Operation.Target.Context)
	}
	planID := c.Instance.PlanID
	if c.Plan != nil {
		planID = c.Plan.ID
	}
	pairs := [][2]string{
		{TagInstanceID, c.Instance.ID},
		{TagServiceID, c.Instance.ServiceID},
		{TagPlanID, planID},
		{TagOrganizationGUID, firstOf(c.Instance.OrganizationGUID, ctx.OrganizationGUID)},
		{TagSpaceGUID, firstOf(c.Instance.SpaceGUID, ctx.SpaceGUID)},
		{TagInstanceName, ctx.InstanceName},
		{TagNamespace, ctx.Namespace},
		{TagSubaccountID, ctx.SubaccountID},
		{TagOperationID, createdBy},
	}
	if c.Plan != nil {
		pairs = append(pairs, [2]string{TagPlanName, c.Plan.Name})
	}
	if c.Service != nil {
		pairs = append(pairs, [2]string{TagServiceName, c.Service.Name})
	}
	return tags(pairs)
}

func bindingTags(c broker.Change, createdBy string) []types.Tag {
	out := instanceTags(c, createdBy)
	return append(out, tags([][2]string{{TagBindingID, c.Binding.ID}, {TagAppGUID, c.Binding.AppGUID}})...)
}

// tags keeps the pairs with a value: CloudFormation refuses an empty one.
func tags(pairs [][2]string) []types.Tag {
	var out []types.Tag
	for _, p := range pairs {
		if v := tagValue(p[1]); v != "" {
			out = append(out, types.Tag{Key: aws.String(p[0]), Value: aws.String(v)})
		}
	}
	return out
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
