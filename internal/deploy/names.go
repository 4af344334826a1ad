package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// HeaderOriginVerify carries the origin secret that the stack's front door
// (CloudFront) adds to every request and the api function requires.
const HeaderOriginVerify = "X-Origin-Verify"

// SealingContextKey is the one key of the KMS encryption context that the
// deployed functions' sealer binds its shared data keys to, with the
// table's name as its value: {"table": name}. The stack's KMS statements
// require exactly that context.
const SealingContextKey = "table"

// BindingUserPath is the IAM path of the users binding templates make
// (services/README.md): the service role may make users there only, and
// ops audit looks for them there.
const BindingUserPath = "/serverless-osb/"

// DefaultStackPrefix starts the name of every stack the broker's services
// make when the stack sets no other (BROKER_STACK_PREFIX).
const DefaultStackPrefix = "osb"

// MaxStackPrefix bounds the stack prefix, so that an instance's stack name
// stays within the CloudFormation driver's budget.
const MaxStackPrefix = 20

// CheckStackPrefix says why p cannot start stack names, or returns nil.
func CheckStackPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("it is empty")
	case len(p) > MaxStackPrefix:
		return fmt.Errorf("%q is %d characters; at most %d are allowed", p, len(p), MaxStackPrefix)
	case !stackNameShaped(p):
		return fmt.Errorf("%q must start with a letter and hold only letters, digits and hyphens (CloudFormation's rule for stack names)", p)
	}
	return nil
}

// DatabaseUserFunctionName is the name of the broker's Custom::DatabaseUser
// function in a VPC (functions/dbuser): infra deploys one in each VPC the
// catalog's networks name, and the CloudFormation driver passes its name
// to the binding templates that make a database user per binding.
func DatabaseUserFunctionName(prefix, vpcID string) string {
	return strings.ToLower(prefix) + "-dbuser-" + vpcID
}

// HandlerCodeKey is where the target stack finds zip, the bundle of one of
// the broker's custom resource functions (dbuser, cacheuser), in the
// bucket its operator names (HandlerCodeBucket): under its SHA-256 digest
// (hex), so that a new build is a new key and an old target stack keeps
// finding its own; `make target-assets` uploads them there.
func HandlerCodeKey(function string, zip []byte) string {
	sum := sha256.Sum256(zip)
	return "serverless-osb/" + hex.EncodeToString(sum[:]) + "/" + function + ".zip"
}

// TargetTemplateBucket names the bucket the target stack makes in each
// target account and Region, where the broker puts the templates over
// CloudFormation's TemplateBody limit of the stacks it makes there: the
// driver finds it by this name, which holds the stack prefix (two brokers
// may share an account), the account and the Region (bucket names are
// global), lower-cased as S3 wants, and stays within S3's 63 characters
// (8 + 20 + 1 + 12 + 1 + 14 at most).
func TargetTemplateBucket(prefix, account, region string) string {
	return "osb-tpl-" + strings.ToLower(prefix) + "-" + account + "-" + region
}

// stackNameShaped reports whether p starts with a letter and holds only
// letters, digits and hyphens (^[A-Za-z][A-Za-z0-9-]*$, written out: its
// compilation was part of every function's package init).
func stackNameShaped(p string) bool {
	for i := range len(p) {
		c := p[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c != '-' && (c < '0' || c > '9')) {
			return false
		}
	}
	return p != ""
}
