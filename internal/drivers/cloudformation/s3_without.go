//go:build osb_without_s3

package cloudformation

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// withoutS3: make build leaves the S3 client out of the bootstraps (build
// tag osb_without_s3, 0.3 MB of the worker's bundle) when every template
// of the catalog is within MaxTemplateBody, so none goes through S3;
// Configure refuses a larger one at start.
const withoutS3 = true

var errNoS3 = errors.New("this bootstrap was built without S3 (build tag osb_without_s3): build the bundles from the catalog with make build")

// NewS3 is no S3 client: every call fails (Configure refuses at start the
// templates that would make one).
func NewS3(aws.Config) S3API { return noS3{} }

type noS3 struct{}

func (noS3) HasObject(context.Context, string, string, string) (bool, error) { return false, errNoS3 }

func (noS3) PutObject(context.Context, string, string, string, string) error { return errNoS3 }

func (noS3) MakeBucket(context.Context, string, string) error { return errNoS3 }

// NewAccount is none: no template goes through a bucket.
func NewAccount(aws.Config) AccountAPI { return nil }
