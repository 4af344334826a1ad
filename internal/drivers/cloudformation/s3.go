//go:build !osb_without_s3

package cloudformation

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// withoutS3 says the binary was built without the S3 client (see
// s3_without.go).
const withoutS3 = false

// NewS3 is the S3 client a template over MaxTemplateBody goes through. An
// endpoint of one's own (moto, locally) serves buckets by path, not by
// host name.
func NewS3(cfg aws.Config) S3API {
	return sdkS3{s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })}
}

// sdkS3 is S3API on the SDK's client.
type sdkS3 struct{ c *s3.Client }

var _ S3API = sdkS3{}

// owner is S3's ExpectedBucketOwner: none when empty.
func owner(account string) *string {
	if account == "" {
		return nil
	}
	return aws.String(account)
}

func (s sdkS3) HasObject(ctx context.Context, bucket, key, account string) (bool, error) {
	_, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ExpectedBucketOwner: owner(account)})
	// S3 answers a HEAD of no object with a bare 404.
	var nf *s3types.NotFound
	var nk *s3types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nk) {
		return false, nil
	}
	return err == nil, err
}

func (s sdkS3) PutObject(ctx context.Context, bucket, key, body, account string) error {
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader(body), ContentType: aws.String("text/plain"), ExpectedBucketOwner: owner(account)})
	return err
}

func (s sdkS3) MakeBucket(ctx context.Context, name, region string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	_, err := s.c.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	if errors.As(err, &owned) {
		return nil
	}
	return err
}

// NewAccount tells the account the driver runs in, which names the
// templates' bucket it makes for itself when none is named (locally).
func NewAccount(cfg aws.Config) AccountAPI { return stsAccount{sts.NewFromConfig(cfg)} }

type stsAccount struct{ c *sts.Client }

func (a stsAccount) AccountID(ctx context.Context) (string, error) {
	id, err := a.c.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", err
	}
	return aws.ToString(id.Account), nil
}
