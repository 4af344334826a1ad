//go:build !osb_without_s3

package cloudformation

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// withoutS3 says the binary was built without the S3 client (see
// s3_without.go).
const withoutS3 = false

// NewS3 is the S3 client a template over MaxTemplateBody goes through. An
// endpoint of one's own (moto, locally) serves buckets by path, not by
// host name.
func NewS3(cfg aws.Config) S3API {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
}

// NewAccount tells the account the driver runs in, which names the
// templates' bucket it makes for itself when none is named (locally).
func NewAccount(cfg aws.Config) AccountAPI { return sts.NewFromConfig(cfg) }
