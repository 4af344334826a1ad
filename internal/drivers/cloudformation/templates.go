package cloudformation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/env"
)

// MaxTemplateURLBody is CloudFormation's limit on a template it reads from
// S3 (TemplateURL): 1 MB. A template over MaxTemplateBody goes that way.
const MaxTemplateURLBody = 1_000_000

// S3API is the part of S3 the driver calls to hand CloudFormation a
// template over MaxTemplateBody, in the driver's own terms: the SDK's
// types stay in s3.go, so that a build without S3 (osb_without_s3)
// imports no package of it, whose init (its endpoint table) would run at
// every cold start. Owner, when set, is the account the bucket must
// belong to (S3's ExpectedBucketOwner). Errors are S3's, as its client
// returns them.
type S3API interface {
	// HasObject reports whether the bucket holds key.
	HasObject(ctx context.Context, bucket, key, owner string) (bool, error)
	// PutObject puts body at key, as text.
	PutObject(ctx context.Context, bucket, key, body, owner string) error
	// MakeBucket makes the bucket in region; one the account owns
	// already is a success.
	MakeBucket(ctx context.Context, name, region string) error
}

// AccountAPI tells the account the driver runs in, which names the bucket
// it makes for itself: STS's GetCallerIdentity (NewAccount, s3.go), in the
// driver's own terms, so that a build without S3 links nothing of STS.
type AccountAPI interface {
	AccountID(ctx context.Context) (string, error)
}

// Templates puts the templates over MaxTemplateBody in a bucket, each under
// its digest (templates/sha256-<hex>.yaml: never overwritten, so a stack's
// URL always names what it was made from), and names their URL. Deployed,
// the bucket is the broker stack's (env.TemplateBucket); locally, with no
// bucket named, the driver makes one of its own on first need,
// serverless-osb-templates-<account>-<region>: outside every stack prefix's
// pattern, so no binding's boundary reaches it.
type Templates struct {
	S3      S3API
	Account AccountAPI
	Region  string
	// Bucket is the bucket's name; empty, the driver's own, made on
	// first need.
	Bucket string
	// ExpectedOwner, when set, is the account the bucket must belong to:
	// a bucket of that name in another account (names are global, and a
	// target account's is known) is refused, not written to.
	ExpectedOwner string

	mu     sync.Mutex
	bucket string // the bucket in use, once known (and made)
}

// URL puts t in the bucket, unless it is there already, and returns the
// URL CloudFormation reads it from.
func (ts *Templates) URL(ctx context.Context, t *Template) (string, error) {
	bucket, err := ts.bucketName(ctx)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(t.Body))
	ext := path.Ext(t.Path)
	if ext == "" {
		ext = ".template"
	}
	key := "templates/sha256-" + hex.EncodeToString(sum[:]) + ext
	found, err := ts.S3.HasObject(ctx, bucket, key, ts.ExpectedOwner)
	if err != nil {
		return "", fmt.Errorf("look for %s in %s: %w", key, bucket, err)
	}
	if !found {
		if err := ts.S3.PutObject(ctx, bucket, key, t.Body, ts.ExpectedOwner); err != nil {
			return "", fmt.Errorf("put %s in %s: %w", key, bucket, err)
		}
	}
	return fmt.Sprintf("https://%s.s3.%s.%s/%s", bucket, ts.Region, urlSuffix(ts.Region), key), nil
}

// bucketName is the bucket in use: the one named, or the driver's own,
// made once per process (CreateBucket of a bucket the account owns
// already is a success).
func (ts *Templates) bucketName(ctx context.Context) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.bucket != "" {
		return ts.bucket, nil
	}
	if ts.Bucket != "" {
		ts.bucket = ts.Bucket
		return ts.bucket, nil
	}
	if ts.Account == nil || ts.Region == "" {
		return "", errors.New("no bucket for templates: set " + env.TemplateBucket)
	}
	account, err := ts.Account.AccountID(ctx)
	if err != nil {
		return "", fmt.Errorf("find the account to name the templates' bucket after: %w", err)
	}
	name := "serverless-osb-templates-" + account + "-" + ts.Region
	if err := ts.S3.MakeBucket(ctx, name, ts.Region); err != nil {
		return "", fmt.Errorf("make the templates' bucket %s: %w", name, err)
	}
	ts.bucket = name
	return name, nil
}

// urlSuffix is the domain of the Region's partition.
func urlSuffix(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

// templateSource is how a call hands CloudFormation t: its body, or, past
// MaxTemplateBody, its URL in the templates' bucket.
func (d *Driver) templateSource(ctx context.Context, t *Template) (body, url *string, err error) {
	if len(t.Body) <= MaxTemplateBody {
		return aws.String(t.Body), nil, nil
	}
	if d.Templates == nil {
		return nil, nil, &broker.Failure{Description: fmt.Sprintf(
			"The template %s is over %d bytes, so CloudFormation must read it from S3, and the broker has no bucket for templates; the platform operator must give it one.",
			t.Path, MaxTemplateBody)}
	}
	u, err := d.Templates.URL(ctx, t)
	// PutObject models no NoSuchBucket: its code says it.
	if code, _, ok := apiError(err); ok && code == "NoSuchBucket" && d.Templates.Bucket != "" {
		return nil, nil, &broker.Failure{Description: fmt.Sprintf(
			"The template %s is over %d bytes, so CloudFormation must read it from S3, and the bucket for templates %s does not exist in the account and Region the stack is made in; the platform operator must deploy the target stack there (its current version makes the bucket).",
			t.Path, MaxTemplateBody, d.Templates.Bucket)}
	}
	if err != nil {
		return nil, nil, classify("put the template in S3", err)
	}
	return nil, aws.String(u), nil
}
